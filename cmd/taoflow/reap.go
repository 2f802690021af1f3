package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/platform/local"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

type reapFlags struct {
	yes    bool
	binary string
}

func newReapCmd(sio stdio, g *globals) *cobra.Command {
	var f reapFlags
	cmd := &cobra.Command{
		Use:   "reap [--yes]",
		Short: "Find taoflow-made instances and containers that no state knows about, and delete them",
		Long: `Reap finds what taoflow runs made and no state accounts for — the state
directory was deleted, or a run died before it could record something — and
deletes it with --yes. It looks at:

  - Brev instances named tf-* (the names taoflow gives the instances it
    creates), through the brev CLI, when brev is installed;
  - Docker containers on this machine labelled taoflow.run=<run>.

What the state in --state records is left alone, as are the containers of
runs whose apply process is alive on this machine (whatever its state
directory): 'taoflow destroy RUN' removes those. Instances kept with
keep: true are recorded, so reap leaves them too.

Brev instances are shared by an organisation: a tf-* instance of a colleague's
run on another machine looks the same as a leftover. Read the list before
--yes.`,
		Example: `  taoflow reap
  taoflow reap --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return reap(cmd.Context(), sio, g, f)
		},
	}
	cmd.Flags().BoolVar(&f.yes, "yes", false, "delete what is found (without it, only list)")
	cmd.Flags().StringVar(&f.binary, "brev-binary", "", "the brev CLI (default: brev on PATH; skipped when there is none)")
	return cmd
}

// orphan is one leftover reap found.
type orphan struct {
	kind, name, detail string
}

func reap(ctx context.Context, sio stdio, g *globals, f reapFlags) error {
	known, live, err := knownResources(ctx, g.stateDir)
	if err != nil {
		return err
	}
	var found []orphan
	var problems []error

	// Brev instances named by taoflow.
	var bv *brev.Brev
	if bin := f.binary; bin != "" || haveProgram("brev") {
		if bv, err = brev.New(brev.Config{Binary: bin, Run: "reap"}); err != nil {
			return usageError(err)
		}
		defer bv.Close()
		insts, err := bv.List(ctx)
		if err != nil {
			problems = append(problems, fmt.Errorf("listing brev instances: %w", err))
		}
		for _, in := range insts {
			if !strings.HasPrefix(in.Ref, brev.Prefix) {
				continue
			}
			if run, ok := known["brev:"+in.Ref]; ok {
				fmt.Fprintf(sio.err, "taoflow: brev instance %s belongs to run %s in the state; not reaped (taoflow destroy %s)\n", in.Ref, run, run)
				continue
			}
			found = append(found, orphan{"brev instance", in.Ref, in.Attrs["status"] + " " + in.Attrs["type"]})
		}
	}

	// Containers on this machine's Docker engine.
	tmp, err := os.MkdirTemp("", "taoflow-reap-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lp := local.New(tmp)
	host, err := lp.Create(ctx, "reap", platform.Spec{Name: "docker"})
	if err != nil {
		return err
	}
	st := steps.New(steps.Config{Platform: lp, RunID: "reap"})
	var containers []string
	if haveProgram("docker") {
		cs, err := st.LabelledContainers(ctx, host)
		if err != nil {
			problems = append(problems, err)
		}
		for _, c := range cs {
			if live[c.Run] || ownerAlive(c.Owner) {
				continue // a run going on, here or in another state directory
			}
			if run, ok := known["job:"+c.Name]; ok {
				fmt.Fprintf(sio.err, "taoflow: container %s belongs to run %s in the state; not reaped (taoflow destroy %s)\n", c.Name, run, run)
				continue
			}
			found = append(found, orphan{"container", c.Name, c.State + ", run " + c.Run})
			containers = append(containers, c.Name)
		}
	}

	if len(found) == 0 {
		fmt.Fprintln(sio.out, "nothing to reap")
		return joinProblems(sio, problems)
	}
	for _, o := range found {
		fmt.Fprintf(sio.out, "%-14s %-50s %s\n", o.kind, o.name, strings.TrimSpace(o.detail))
	}
	if !f.yes {
		fmt.Fprintf(sio.out, "%d found; run 'taoflow reap --yes' to delete them\n", len(found))
		return joinProblems(sio, problems)
	}
	left := 0
	for _, o := range found {
		if o.kind != "brev instance" {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		err := bv.Delete(dctx, platform.Instance{Name: o.name, Ref: o.name, Created: true})
		cancel()
		if err != nil {
			left++
			fmt.Fprintf(sio.out, "brev instance %s: NOT deleted: %v\n", o.name, err)
			continue
		}
		fmt.Fprintf(sio.out, "brev instance %s: deleted\n", o.name)
	}
	if len(containers) > 0 {
		if err := st.RemoveContainers(ctx, host, containers); err != nil {
			left += len(containers)
			fmt.Fprintf(sio.out, "containers %s: NOT all removed: %v\n", strings.Join(containers, " "), err)
		} else {
			fmt.Fprintf(sio.out, "containers %s: removed\n", strings.Join(containers, " "))
		}
	}
	if left > 0 {
		fmt.Fprintf(sio.err, "taoflow: %d could not be removed; they may still exist (and bill)\n", left)
		return silent(exitTeardown)
	}
	return joinProblems(sio, problems)
}

// knownResources reads what the state in dir accounts for: "brev:NAME" and
// "job:NAME" of every resource that may still exist, mapped to its run, and
// the runs whose apply is alive. A missing state knows nothing.
func knownResources(ctx context.Context, dir string) (map[string]string, map[string]bool, error) {
	known, live := map[string]string{}, map[string]bool{}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); errors.Is(err, os.ErrNotExist) {
		return known, live, nil
	}
	store, err := state.OpenReadOnly(dir)
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range runs {
		if applyAlive(r) {
			live[r.ID] = true
		}
	}
	alive, err := store.AliveAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, res := range alive {
		switch {
		case res.Kind == state.KindInstance && res.Platform == plan.PlatformBrev:
			name := res.Data["ref"]
			if name == "" {
				name = brev.InstanceName(res.RunID, res.Instance)
			}
			known["brev:"+name] = res.RunID
		case res.Kind == state.KindJob:
			known["job:"+res.Name] = res.RunID
		}
	}
	return known, live, nil
}

// ownerAlive reports whether owner ("HOST:PID", a container's
// taoflow.owner label) is a process alive on this host.
func ownerAlive(owner string) bool {
	host, pid, ok := strings.Cut(owner, ":")
	if !ok {
		return false
	}
	me, _ := os.Hostname()
	n, err := strconv.Atoi(pid)
	if host != me || err != nil || n <= 0 {
		return false
	}
	return syscall.Kill(n, 0) == nil
}

func haveProgram(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func joinProblems(sio stdio, problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(sio.err, "taoflow: %v\n", p)
	}
	return silent(exitFailed)
}
