package main

import (
	"context"
	"encoding/json"
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
	json   bool
	binary string
	plans  []string
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
  - Docker containers labelled taoflow.run=<run> on this machine, and with
    --plan PLAN on the ssh hosts and existing brev instances PLAN names.

What the state in --state records is left alone. So are the brev instances
of runs whose apply is running on this machine (announced in the user's cache
directory), and the containers of runs whose apply process is alive on this
machine (their taoflow.owner label), whatever their state directory:
'taoflow destroy RUN' removes those. Instances kept with keep: true are
recorded, so reap leaves them too. A container whose run is driven from
another machine is left to that machine.

Brev instances are shared by an organisation: a tf-* instance of a colleague's
run on another machine looks the same as a leftover. Read the list before
--yes.`,
		Example: `  taoflow reap
  taoflow reap --plan ssh-box.yaml
  taoflow reap --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return reap(cmd.Context(), sio, g, f)
		},
	}
	cmd.Flags().BoolVar(&f.yes, "yes", false, "delete what is found (without it, only list)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print what was found (and done) as JSON")
	cmd.Flags().StringVar(&f.binary, "brev-binary", "", "the brev CLI (default: brev on PATH; skipped when there is none)")
	cmd.Flags().StringArrayVar(&f.plans, "plan", nil, "also look at the containers on the ssh hosts and existing brev instances of `PLAN` (repeatable)")
	return cmd
}

// orphan is one leftover reap found.
type orphan struct {
	Kind   string `json:"kind"` // "brev instance" or "container"
	Name   string `json:"name"`
	Detail string `json:"detail"`
	// Removed is set with --yes: whether it is gone; Error says why not.
	Removed *bool  `json:"removed,omitempty"`
	Error   string `json:"error,omitempty"`
	host    *dockerHost
}

func reap(ctx context.Context, sio stdio, g *globals, f reapFlags) error {
	known, live, err := knownResources(ctx, g.stateDir)
	if err != nil {
		return err
	}
	liveHere := liveNames()
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
			if run, ok := liveHere[in.Ref]; ok {
				fmt.Fprintf(sio.err, "taoflow: brev instance %s belongs to run %s, whose apply is running on this machine; not reaped\n", in.Ref, run)
				continue
			}
			found = append(found, orphan{Kind: "brev instance", Name: in.Ref, Detail: strings.TrimSpace(in.Attrs["status"] + " " + in.Attrs["type"])})
		}
	}

	// Containers on this machine's Docker engine, and on the instances of
	// the plans given (ssh hosts, existing brev instances).
	hosts, closeHosts, err := dockerHosts(ctx, f.plans, g.stateDir)
	if err != nil {
		return err
	}
	defer closeHosts()
	me, _ := os.Hostname()
	seen := map[string]bool{}
	for _, h := range hosts {
		cs, err := h.steps.LabelledContainers(ctx, h.inst)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", h.label, err))
			continue
		}
		for _, c := range cs {
			if seen[c.Name] {
				continue // the same engine, reached another way
			}
			seen[c.Name] = true
			if live[c.Run] || ownerAlive(c.Owner) {
				continue // a run going on, here or in another state directory
			}
			if run, ok := known["job:"+c.Name]; ok {
				fmt.Fprintf(sio.err, "taoflow: container %s on %s belongs to run %s in the state; not reaped (taoflow destroy %s)\n", c.Name, h.label, run, run)
				continue
			}
			if owner, _, _ := strings.Cut(c.Owner, ":"); owner != "" && owner != me {
				fmt.Fprintf(sio.err, "taoflow: container %s on %s belongs to a run driven from %s; not reaped from here\n", c.Name, h.label, owner)
				continue
			}
			found = append(found, orphan{Kind: "container", Name: c.Name, Detail: c.State + ", run " + c.Run + ", on " + h.label, host: h})
			h.names = append(h.names, c.Name)
		}
	}

	if !f.yes {
		return reapReport(sio, f, found, problems)
	}
	left := 0
	for i := range found {
		o := &found[i]
		if o.Kind != "brev instance" {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		err := bv.Delete(dctx, platform.Instance{Name: o.Name, Ref: o.Name, Created: true})
		cancel()
		o.done(err)
		if err != nil {
			left++
		}
	}
	for _, h := range hosts {
		if len(h.names) == 0 {
			continue
		}
		err := h.steps.RemoveContainers(ctx, h.inst, h.names)
		for i := range found {
			if found[i].host == h {
				found[i].done(err)
				if err != nil {
					left++
				}
			}
		}
	}
	if err := reapReport(sio, f, found, problems); err != nil {
		return err
	}
	if left > 0 {
		fmt.Fprintf(sio.err, "taoflow: %d could not be removed; they may still exist (and bill)\n", left)
		return silent(exitTeardown)
	}
	return nil
}

// done records what removing o did.
func (o *orphan) done(err error) {
	removed := err == nil
	o.Removed = &removed
	if err != nil {
		o.Error = err.Error()
	}
}

// reapReport prints what reap found (and, with --yes, did), as lines or
// as one JSON object.
func reapReport(sio stdio, f reapFlags, found []orphan, problems []error) error {
	if f.json {
		var probs []string
		for _, p := range problems {
			probs = append(probs, p.Error())
		}
		enc := json.NewEncoder(sio.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Found    []orphan `json:"found"`
			Problems []string `json:"problems,omitempty"`
		}{append([]orphan{}, found...), probs}); err != nil {
			return err
		}
		if len(problems) > 0 {
			return silent(exitFailed)
		}
		return nil
	}
	if len(found) == 0 {
		fmt.Fprintln(sio.out, "nothing to reap")
		return joinProblems(sio, problems)
	}
	for _, o := range found {
		switch {
		case o.Removed == nil:
			fmt.Fprintf(sio.out, "%-14s %-50s %s\n", o.Kind, o.Name, o.Detail)
		case *o.Removed:
			fmt.Fprintf(sio.out, "%s %s: removed\n", o.Kind, o.Name)
		default:
			fmt.Fprintf(sio.out, "%s %s: NOT removed: %s\n", o.Kind, o.Name, o.Error)
		}
	}
	if !f.yes {
		fmt.Fprintf(sio.out, "%d found; run 'taoflow reap --yes' to delete them\n", len(found))
	}
	return joinProblems(sio, problems)
}

// dockerHost is a Docker engine reap looks at.
type dockerHost struct {
	label string // "this machine", or "INSTANCE (plan FILE)"
	steps *steps.Steps
	inst  platform.Instance
	names []string // the containers to remove there
}

// dockerHosts returns this machine's Docker engine (when docker is
// installed) and the instances the plans name that exist without taoflow
// (ssh hosts, existing brev instances); created ones are reaped whole. The
// returned func releases the connections.
func dockerHosts(ctx context.Context, plans []string, stateDir string) ([]*dockerHost, func(), error) {
	var hosts []*dockerHost
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, file := range plans {
		p, diags := plan.Load(file, plan.Options{})
		if diags.HasErrors() || p == nil {
			closeAll()
			return nil, func() {}, usageError(fmt.Errorf("%s: not a valid plan (taoflow validate %s)", file, file))
		}
		if p.Platform.Kind == plan.PlatformLocal {
			continue // its sandboxes share this machine's engine
		}
		pf, err := newPlatform(p, "reap", stateDir, nil)
		if err != nil {
			closeAll()
			return nil, func() {}, usageError(fmt.Errorf("%s: %w", file, err))
		}
		if c, ok := pf.(platform.Closer); ok {
			closers = append(closers, func() { _ = c.Close() })
		}
		st := steps.New(steps.Config{Platform: pf, RunID: "reap"})
		for _, in := range p.Instances {
			ref := in.Host
			if in.Existing != "" {
				ref = in.Existing
			}
			if ref == "" {
				continue
			}
			hosts = append(hosts, &dockerHost{label: fmt.Sprintf("%s (%s)", in.Name, file), steps: st, inst: platform.Instance{Name: in.Name, Ref: ref}})
		}
	}
	// This machine last: when a plan's instance is this machine too, its
	// containers are shown once, on the instance.
	if haveProgram("docker") {
		tmp, err := os.MkdirTemp("", "taoflow-reap-")
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { _ = os.RemoveAll(tmp) })
		lp := local.New(tmp)
		inst, err := lp.Create(ctx, "reap", platform.Spec{Name: "docker"})
		if err != nil {
			return nil, closeAll, err
		}
		hosts = append(hosts, &dockerHost{label: "this machine", steps: steps.New(steps.Config{Platform: lp, RunID: "reap"}), inst: inst})
	}
	return hosts, closeAll, nil
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
