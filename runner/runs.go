package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/state"
)

// RefusedError is a request refused as given: a plan that changed, a run
// still being applied, a platform CLI too old. Nothing was started; the CLI
// exits 2.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

func refused(err error) error { return &RefusedError{Err: err} }

// NewRunID makes a run id: the plan name, the time, and 4 random hex digits.
func NewRunID(name string) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s-%s", name, time.Now().UTC().Format("0102-150405"), hex.EncodeToString(b))
}

// FindRun resolves a run id, a run's name (apply --name), a unique prefix
// of an id, or "latest". A run the state does not know is a *RefusedError
// naming it and listing the runs it does know; other errors are the
// store's.
func FindRun(ctx context.Context, store *state.Store, id string) (state.Run, error) {
	if id == "" {
		// Every id starts with "": an empty prefix would pick a run the
		// user never named.
		return state.Run{}, errors.New(`the run id is empty: give a run id, a unique prefix of one, or "latest" (taoflow status lists them)`)
	}
	if id == "latest" {
		r, err := store.LatestRun(ctx)
		if errors.Is(err, state.ErrNotFound) {
			return r, refused(errors.New("there are no runs in the state yet"))
		}
		return r, err
	}
	if r, err := store.Run(ctx, id); err == nil {
		return r, nil
	}
	if r, err := store.RunByName(ctx, id); err == nil {
		return r, nil // apply --name
	}
	runs, err := store.Runs(ctx)
	if err != nil {
		return state.Run{}, err
	}
	var match []state.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return state.Run{}, UnknownRun(id, runs)
	}
	var ids []string
	for _, r := range match {
		ids = append(ids, r.ID)
	}
	return state.Run{}, refused(fmt.Errorf("%q matches several runs: %s", id, strings.Join(ids, ", ")))
}

// UnknownRun is the error for a run id that none of runs (newest first)
// has: it names the id and lists the known runs, the newest ten.
func UnknownRun(id string, runs []state.Run) error {
	if len(runs) == 0 {
		return refused(fmt.Errorf("no run %q: the state holds no runs", id))
	}
	var ids []string
	for i, r := range runs {
		if i == 10 {
			ids = append(ids, fmt.Sprintf("… %d more (taoflow status lists them)", len(runs)-10))
			break
		}
		ids = append(ids, r.ID)
	}
	return refused(fmt.Errorf("no run %q in the state; its runs: %s", id, strings.Join(ids, ", ")))
}

// ApplyAlive reports whether the apply that owns run still runs on this
// host: the run is running and its owner process is alive (OwnerAlive: the
// same process, not one that was given its pid later).
func ApplyAlive(r state.Run) bool {
	return r.State == state.RunRunning && OwnerAlive(r)
}

// ApplyGone reports whether the state says run is running while its apply
// is not: it died (kill -9, a crash, a closed laptop) on this host. The run
// then waits for `taoflow apply PLAN --resume RUN` or `taoflow destroy RUN`.
// An apply on another host can't be checked from here: not gone.
func ApplyGone(r state.Run) bool {
	host, _ := os.Hostname()
	if r.State != state.RunRunning || r.Host != host || r.PID <= 0 || r.PID == os.Getpid() {
		return false
	}
	return syscall.Kill(r.PID, 0) != nil
}

// NextSteps are the commands that go on from a run whose apply is gone:
// resume it, or tear down what it left (alive: its resources that may
// still exist, whose recorded settings say which flags destroy needs).
func NextSteps(r state.Run, alive []state.Resource) []string {
	datas := make([]map[string]string, 0, len(alive))
	for _, res := range alive {
		datas = append(datas, res.Data)
	}
	return []string{"taoflow apply " + shellquote.Quote(r.PlanFile) + " --resume " + r.ID, "taoflow destroy " + r.ID + confirmFlags(datas...)}
}

// SelectNodes returns the nodes of a run that x names, for `taoflow logs
// RUN X`: a node id; a step id (all its nodes); a cell id (all the nodes
// of that cell); or a prefix of one node id. many says x named a group,
// whose lines are then shown with their node. Anything else is a
// *RefusedError with a did-you-mean.
func SelectNodes(run string, nodes []state.Node, x string) (sel []state.Node, many bool, err error) {
	for _, n := range nodes {
		if n.ID == x {
			return []state.Node{n}, false, nil
		}
	}
	for _, field := range []func(state.Node) string{
		func(n state.Node) string { return n.Step },
		func(n state.Node) string { return n.Cell },
	} {
		for _, n := range nodes {
			if field(n) == x {
				sel = append(sel, n)
			}
		}
		if len(sel) > 0 {
			return sel, true, nil
		}
	}
	var ids []string
	for _, n := range nodes {
		if strings.HasPrefix(n.ID, x) {
			sel = append(sel, n)
			ids = append(ids, n.ID)
		}
	}
	switch {
	case len(sel) == 1:
		return sel, false, nil
	case len(sel) > 1:
		if len(ids) > 10 {
			ids = append(ids[:10], fmt.Sprintf("… %d more", len(ids)-10))
		}
		return nil, false, refused(fmt.Errorf("%q matches several nodes of run %s: %s", x, run, strings.Join(ids, ", ")))
	}
	seen := map[string]bool{}
	var names []string
	for _, n := range nodes {
		for _, name := range []string{n.ID, n.Step, n.Cell} {
			if name != "" && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	hint := ""
	if best := plan.Closest(x, names); best != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", best)
	}
	return nil, false, refused(fmt.Errorf("run %s has no node, step or cell %q%s; taoflow status %s lists its nodes", run, x, hint, run))
}
