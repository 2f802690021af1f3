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
// of an id, or "latest".
func FindRun(ctx context.Context, store *state.Store, id string) (state.Run, error) {
	if id == "latest" {
		r, err := store.LatestRun(ctx)
		if errors.Is(err, state.ErrNotFound) {
			return r, errors.New("there are no runs in the state yet")
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
		return state.Run{}, fmt.Errorf("no run %q in the state (taoflow status lists them)", id)
	}
	var ids []string
	for _, r := range match {
		ids = append(ids, r.ID)
	}
	return state.Run{}, fmt.Errorf("%q matches several runs: %s", id, strings.Join(ids, ", "))
}

// ApplyAlive reports whether the apply that owns run still runs on this host.
func ApplyAlive(r state.Run) bool {
	host, _ := os.Hostname()
	if r.PID <= 0 || r.Host != host || r.PID == os.Getpid() {
		return false
	}
	if r.State != state.RunRunning {
		return false
	}
	return syscall.Kill(r.PID, 0) == nil
}
