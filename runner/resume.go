package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// Resumed is what the state says about a run being resumed.
type Resumed struct {
	Run state.Run
	// StartedBy is who started the run, "USER on HOST", from its
	// provenance; empty when the state does not say.
	StartedBy string
	nodes     []state.Node
	instances map[string]state.Resource // instance resources created or being created, by instance name
}

// LoadResumed reads run id from the state in dir; id "latest" is the
// latest unfinished run (not succeeded) of the plan file planPath. It
// refuses a run whose apply is alive.
func LoadResumed(ctx context.Context, dir, id, planPath string) (*Resumed, error) {
	if _, err := os.Stat(filepath.Join(dir, "state.db")); errors.Is(err, os.ErrNotExist) {
		return nil, refused(fmt.Errorf("no state in %s: nothing to resume", dir))
	}
	store, err := state.OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	var r state.Run
	if id == "latest" {
		r, err = latestUnfinished(ctx, store, planPath)
	} else {
		r, err = FindRun(ctx, store, id)
	}
	if err != nil {
		return nil, err
	}
	startedBy, elsewhere := startedBy(ctx, store, r.ID)
	if elsewhere && id == "latest" {
		who := "the state does not say who started it"
		if startedBy != "" {
			u, h := provenance.Who()
			who = fmt.Sprintf("it was started by %s, not by you (%s on %s)", startedBy, u, h)
		}
		return nil, refused(fmt.Errorf("not resuming run %s without its id: %s. A state from elsewhere (a committed .taoflow/) would have apply run with its recorded vars; check them (taoflow status %s), then name the run: --resume %s", r.ID, who, r.ID, r.ID))
	}
	if ApplyAlive(r) {
		return nil, refused(fmt.Errorf("run %s is still running (apply pid %d); it can't be resumed twice (taoflow cancel %s stops it)", r.ID, r.PID, r.ID))
	}
	nodes, err := store.Nodes(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	alive, err := store.Alive(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	res := &Resumed{Run: r, StartedBy: startedBy, nodes: nodes, instances: map[string]state.Resource{}}
	for _, a := range alive {
		if a.Kind == state.KindInstance && (a.State == state.ResourceCreated || a.State == state.ResourceIntent) {
			res.instances[a.Instance] = a
		}
	}
	return res, nil
}

// startedBy is who started run, "USER on HOST" from its provenance, and
// whether that is someone else or somewhere else than this process (or
// the state does not say).
func startedBy(ctx context.Context, store *state.Store, run string) (string, bool) {
	rec, err := store.RunRecord(ctx, run)
	if err != nil || len(rec.Provenance) == 0 {
		return "", true
	}
	var info provenance.Info
	if json.Unmarshal(rec.Provenance, &info) != nil || info.User == "" || info.Host == "" {
		return "", true
	}
	u, h := provenance.Who()
	return info.User + " on " + info.Host, info.User != u || info.Host != h
}

// latestUnfinished returns the newest run of planPath that did not
// succeed.
func latestUnfinished(ctx context.Context, store *state.Store, planPath string) (state.Run, error) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return state.Run{}, err
	}
	for _, r := range runs {
		if filepath.Clean(r.PlanFile) == filepath.Clean(planPath) && r.State != state.RunSucceeded {
			return r, nil
		}
	}
	return state.Run{}, refused(fmt.Errorf("no unfinished run of %s to resume (name one: --resume RUN; taoflow status lists them)", planPath))
}

// VarFlags returns the run's vars as --var flags, so the plan is loaded
// as it was.
func (r *Resumed) VarFlags() []string {
	var out []string
	for k, v := range r.Run.Vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// CheckVars accepts --var values that equal those the run started with,
// so that the command line that started it, with --resume appended, resumes
// it. A var it differs on, or one the run does not have, is refused, naming
// the var and both values.
func (r *Resumed) CheckVars(flags map[string]string) error {
	names := make([]string, 0, len(flags))
	for k := range flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		was, ok := r.Run.Vars[k]
		switch {
		case !ok:
			return refused(fmt.Errorf("--var %s: run %s has no var %s; a resumed run keeps the vars it started with", k, r.Run.ID, k))
		case was != flags[k]:
			return refused(fmt.Errorf("--var %s=%q differs from the value run %s started with (%s=%q); a resumed run keeps its vars: drop the --var, or start a new run", k, flags[k], r.Run.ID, k, was))
		}
	}
	return nil
}

// done returns the nodes that succeeded, with the instance each ran on.
func (r *Resumed) done() map[string]string {
	d := map[string]string{}
	for _, n := range r.nodes {
		if engine.NodeState(n.State) == engine.Succeeded {
			d[n.ID] = n.Instance
		}
	}
	return d
}

// slots returns the slot index each node recorded (factSlot), so a cell
// resumed part way keeps its slot and GPUs.
func (r *Resumed) slots() map[string]int {
	out := map[string]int{}
	for _, n := range r.nodes {
		if i, err := strconv.Atoi(n.Facts[factSlot]); err == nil {
			out[n.ID] = i
		}
	}
	return out
}

// claim makes this process the run's owner again.
func (r *Resumed) claim(ctx context.Context, store *state.Store, host string) error {
	if err := store.SetRunOwner(ctx, r.Run.ID, os.Getpid(), host, selfIdentity()); err != nil {
		return err
	}
	return store.UpdateRun(ctx, r.Run.ID, state.RunUpdate{State: state.RunRunning, Message: "resumed"})
}

// restore gives the steps and the instances what the earlier attempts
// learned: the image digests pulls recorded, and the instances the run
// created that may still exist (used again instead of created anew).
func (r *Resumed) restore(st *steps.Steps, insts *instances) {
	for _, n := range r.nodes {
		if engine.NodeState(n.State) == engine.Succeeded && n.Facts[steps.RecordDigest] != "" {
			st.RememberDigest(n.Instance, n.Facts[steps.RecordImage], n.Facts[steps.RecordDigest])
		}
		if g, err := strconv.Atoi(n.Facts[steps.RecordGPUs]); err == nil && engine.NodeState(n.State) == engine.Succeeded {
			st.RememberGPUs(n.Instance, g)
		}
	}
	insts.prior = r.instances
	insts.rearm = true
}
