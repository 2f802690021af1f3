package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// Destroyer tears down what runs recorded and may have left: the run's jobs
// on each instance it used are stopped, the instances it created deleted.
// Instances it only used (existing:, ssh hosts) are never deleted.
type Destroyer struct {
	Store    *state.Store
	StateDir string
	// Log hears a line per resource: removed, or not and why.
	Log io.Writer
	// CanceledExitCode is recorded as the exit code of a run that was
	// running (its apply died) or whose teardown was incomplete, once
	// nothing of it is left.
	CanceledExitCode int
	// Confirmed are the programs and configs the user named for this
	// destroy; see Check.
	Confirmed Confirmed
	// TransientBackoff is steps.Config.TransientBackoff for the commands
	// that stop the runs' jobs (0: the default).
	TransientBackoff time.Duration
	// StopTimeout is steps.Config.StopTimeout for the stop of the runs'
	// jobs on an instance (0: the default).
	StopTimeout time.Duration
}

// Confirmed names the brev program and the ssh client config that the
// user confirmed on the command line (destroy/cancel --brev-binary,
// --ssh-config); "" is none.
//
// The state records the ones apply used, but destroy never runs what the
// state alone names: whoever wrote the state chose it, and a state can come
// from someone else (a shared directory, a committed .taoflow/). A hash of
// the file recorded beside it would prove nothing, since a forged state
// carries the hash of its own program. So a recorded brev binary other than
// the plain "brev" on the user's PATH, and any recorded ssh config (which
// can run commands: ProxyCommand, LocalCommand, Match exec), are used only
// when the user names the same file again; a confirmed one replaces the
// recorded one.
type Confirmed struct {
	BrevBinary string
	SSHConfig  string
}

// Check refuses (*RefusedError) resources whose recorded platform settings
// name a program or an ssh config that the user has not confirmed (see
// Confirmed). Nothing was run when it refuses.
func (d Destroyer) Check(runID string, alive []state.Resource) error {
	for _, res := range alive {
		if _, err := d.confirmedData(res.Data); err != nil {
			return refused(fmt.Errorf("run %s, %s %s: %w", runID, res.Kind, res.Name, err))
		}
		// A brev instance the run created has the name the run gives it;
		// a state naming another (one of your other instances) is not
		// trusted to delete it.
		if ref := res.Data["ref"]; res.Platform == plan.PlatformBrev && res.Kind == state.KindInstance && ref != "" {
			if want := brev.InstanceName(runID, res.Instance); ref != want {
				return refused(fmt.Errorf("run %s, instance %s: the state names the brev instance %q, but run %s named it %q; refusing to delete what the run did not name", runID, res.Instance, ref, runID, want))
			}
		}
	}
	return nil
}

// confirmedData returns the platform settings of recorded data with the
// program and config the user confirmed in place of the recorded ones, or
// an error naming a recorded one that was not confirmed.
func (d Destroyer) confirmedData(recorded map[string]string) (map[string]string, error) {
	data := map[string]string{}
	for k, v := range recorded {
		if strings.HasPrefix(k, "pf.") {
			data[k] = v
		}
	}
	switch bin := data[dataBinary]; {
	case d.Confirmed.BrevBinary != "":
		data[dataBinary] = d.Confirmed.BrevBinary
	case bin == "" || bin == "brev":
		data[dataBinary] = "" // brev on the user's PATH
	default:
		return nil, fmt.Errorf("the state names the brev program %q; taoflow does not run a program that only the state names "+
			"(whoever wrote the state chose it). If it is yours, confirm it: --brev-binary %s", bin, shellquote.Quote(bin))
	}
	switch cfg := data[dataSSHConfig]; {
	case d.Confirmed.SSHConfig != "":
		data[dataSSHConfig] = d.Confirmed.SSHConfig
	case cfg != "":
		return nil, fmt.Errorf("the state names the ssh config %q; taoflow does not use an ssh config that only the state names "+
			"(it can run commands: ProxyCommand). If it is yours, confirm it: --ssh-config %s", cfg, shellquote.Quote(cfg))
	}
	return data, nil
}

// DestroyCommand is the command that removes what run left of resources
// (those that may still exist): "taoflow destroy RUN --yes", with the
// --brev-binary and --ssh-config that Check would otherwise refuse for
// (exit 2) because the recorded platform settings name them. Every piece
// of advice to run destroy is this command, so that it works as printed.
func DestroyCommand(run string, resources []state.Resource) string {
	datas := make([]map[string]string, 0, len(resources))
	for _, res := range resources {
		datas = append(datas, res.Data)
	}
	return "taoflow destroy " + run + " --yes" + confirmFlags(datas...)
}

// confirmFlags are the destroy flags that confirm the brev program and ssh
// config that recorded platform settings (resource data, or PlatformData)
// name: " --brev-binary B --ssh-config C", each only when needed (see
// Confirmed), shell-quoted; "" when none is.
func confirmFlags(datas ...map[string]string) string {
	var bin, cfg string
	for _, d := range datas {
		if b := d[dataBinary]; bin == "" && b != "" && b != "brev" {
			bin = b
		}
		if c := d[dataSSHConfig]; cfg == "" && c != "" {
			cfg = c
		}
	}
	flags := ""
	if bin != "" {
		flags += " --brev-binary " + shellquote.Quote(bin)
	}
	if cfg != "" {
		flags += " --ssh-config " + shellquote.Quote(cfg)
	}
	return flags
}

// Destroy tears down alive, the resources of run r that may still exist.
// It returns nil when none remains, else an errors.Join of one
// *NotRemovedError for each resource that may still exist.
func (d Destroyer) Destroy(ctx context.Context, r state.Run, alive []state.Resource) error {
	byInstance := map[string][]state.Resource{}
	var order []string
	for _, res := range alive {
		if _, ok := byInstance[res.Instance]; !ok {
			order = append(order, res.Instance)
		}
		byInstance[res.Instance] = append(byInstance[res.Instance], res)
	}
	var left []error
	for _, name := range order {
		resources := byInstance[name]
		pf, inst, err := d.platformFor(resources)
		if err != nil {
			fmt.Fprintf(d.Log, "%s: %s: %v\n", r.ID, name, err)
			for _, res := range resources {
				left = append(left, &NotRemovedError{Run: r.ID, Resource: res, Err: err})
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		st := steps.New(steps.Config{Platform: pf, RunID: r.ID, TransientBackoff: d.TransientBackoff, StopTimeout: d.StopTimeout,
			OnAutostop: func(instance string, dec steps.AutostopDecision) {
				recordAutostopFired(ctx, d.Store, r.ID, instance, dec)
				fmt.Fprintf(d.Log, "%s: %s: autostop: %s\n", r.ID, instance, dec)
			}})
		created := false
		for _, res := range resources {
			created = created || res.Kind == state.KindInstance
		}
		// An instance the platform no longer lists (or is deleting) is
		// gone, jobs and all; on a stopped one nothing runs. Neither is
		// reached for.
		var where error
		if f, ok := pf.(platform.Finder); ok && inst.Ref != "" {
			if err := f.Find(cctx, inst); errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrStopped) {
				where = err
			}
		}
		gone := errors.Is(where, platform.ErrNotFound)
		if errors.Is(where, platform.ErrStopped) {
			if line := foundStopped(cctx, d.Store, r.ID, name); line != "" {
				fmt.Fprintf(d.Log, "%s: %s: autostop: %s\n", r.ID, name, line)
			}
		}
		if inst.Ref != "" && where == nil {
			// Bounded (StopTimeout): a hung instance must not take the
			// time of its delete.
			if err := st.CleanupBefore(cctx, inst); err != nil {
				switch {
				case created && errors.Is(err, steps.ErrStopTimedOut):
					fmt.Fprintf(d.Log, "%s: %s: could not stop the jobs (%v); deleting it\n", r.ID, name, err)
				case created:
					fmt.Fprintf(d.Log, "%s: stopping jobs on %s: %v\n", r.ID, name, err)
					fmt.Fprintf(d.Log, "%s: %s is deleted all the same (deleting it stops them)\n", r.ID, name)
				default:
					fmt.Fprintf(d.Log, "%s: stopping jobs on %s: %v\n", r.ID, name, err)
				}
			}
		}
		// The delete runs on a context of its own, with the platform's
		// own bound: whatever the job stop used is not taken from it.
		dctx, dcancel := context.WithTimeout(ctx, deleteBound(pf))
		for _, res := range resources {
			var err error
			if res.Kind == state.KindInstance && !gone {
				if del, ok := pf.(platform.Deleter); ok {
					err = del.Delete(dctx, inst)
				}
			}
			if err != nil {
				left = append(left, &NotRemovedError{Run: r.ID, Resource: res, Err: err})
				_ = d.Store.MarkFailed(ctx, res.ID, err.Error())
				fmt.Fprintf(d.Log, "%s: %s %s: NOT removed: %v\n", r.ID, res.Kind, res.Name, err)
				continue
			}
			_ = d.Store.MarkDeleted(ctx, res.ID)
			if gone {
				fmt.Fprintf(d.Log, "%s: %s %s: removed (already gone: %v)\n", r.ID, res.Kind, res.Name, where)
				continue
			}
			fmt.Fprintf(d.Log, "%s: %s %s: removed\n", r.ID, res.Kind, res.Name)
		}
		dcancel()
		cancel()
		if c, ok := pf.(platform.Closer); ok {
			_ = c.Close()
		}
	}
	// What ssh left of the run's dead apply: its empty control directory.
	ssh.Sweep(r.ID)
	if left == nil && (r.State == state.RunRunning || r.State == state.RunTeardownIncomplete) {
		_ = d.Store.UpdateRun(ctx, r.ID, state.RunUpdate{State: state.RunCanceled, EndedAt: time.Now(), ExitCode: d.CanceledExitCode, Message: "torn down by taoflow destroy"})
	}
	return errors.Join(left...)
}

// NotRemovedError is a resource of a run that destroy could not remove:
// it may still exist (and bill).
type NotRemovedError struct {
	Run      string
	Resource state.Resource
	Err      error
}

func (e *NotRemovedError) Error() string {
	what := e.Resource.Kind + " " + e.Resource.Name
	if e.Resource.Kind != state.KindInstance {
		what += " on " + e.Resource.Instance
	}
	if ref := e.Resource.Data["ref"]; ref != "" && ref != e.Resource.Name {
		what += " (" + ref + ")"
	}
	return fmt.Sprintf("run %s: %s: %v", e.Run, what, e.Err)
}

func (e *NotRemovedError) Unwrap() error { return e.Err }

// platformFor rebuilds the platform and instance a run's resources live on
// from the settings recorded with them.
func (d Destroyer) platformFor(resources []state.Resource) (platform.Platform, platform.Instance, error) {
	inst := platform.Instance{Created: true}
	kind := ""
	data := map[string]string{}
	for _, res := range resources {
		d, err := d.confirmedData(res.Data)
		if err != nil {
			return nil, inst, err
		}
		maps.Copy(data, d)
		inst.Name = res.Instance
		if ref := res.Data["ref"]; ref != "" {
			inst.Ref = ref
		}
		if ref := res.Data["instance_ref"]; ref != "" && inst.Ref == "" {
			inst.Ref = ref
		}
		if res.Platform != "" {
			kind = res.Platform
		}
	}
	// brev runs with the caller's environment less the run's secrets, as
	// in apply: their values are for the instances.
	env := environWithout(os.Environ(), strings.Split(data[dataSecrets], ","))
	pf, err := BuildPlatform(kind, data, "destroy", d.StateDir, PlatformOptions{Env: env})
	if err != nil {
		return nil, inst, fmt.Errorf("resources on the %q platform: %w", kind, err)
	}
	return pf, inst, nil
}
