package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Run states. The store keeps State as a plain string and does not check it.
const (
	RunRunning            = "running"
	RunSucceeded          = "succeeded"
	RunFailed             = "failed"
	RunCanceled           = "canceled"
	RunInterrupted        = "interrupted"
	RunTeardownIncomplete = "teardown-incomplete"
)

// Run is one `taoflow apply` of a plan.
type Run struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"` // the plan's name
	PlanFile string            `json:"plan_file"`
	PlanHash string            `json:"plan_hash"`
	Vars     map[string]string `json:"vars,omitempty"` // nil when empty
	State    string            `json:"state"`          // one of the Run* constants
	PID      int               `json:"pid"`            // of the taoflow process that owns the run
	Host     string            `json:"host"`           // where that process runs
	// Proc tells that process apart from a later one given the same pid:
	// what the owner recorded about itself (its start time, boot and
	// command line; see runner). "" when not recorded.
	Proc      string    `json:"-"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	ExitCode  int       `json:"exit_code"`
	Message   string    `json:"message,omitempty"`
}

// RunUpdate is the new outcome of a run. UpdateRun sets every field, so a
// run set back to running has its end time, exit code and message cleared.
type RunUpdate struct {
	State    string
	EndedAt  time.Time
	ExitCode int
	Message  string
}

// CreateRun records a new run. Its ID must be unused.
func (s *Store) CreateRun(ctx context.Context, r Run) error {
	if err := s.writable("create run"); err != nil {
		return err
	}
	_, err := s.st.createRun.ExecContext(ctx,
		s.r(r.ID), s.r(r.Name), s.r(r.PlanFile), s.r(r.PlanHash), s.encodeMap(r.Vars),
		s.r(r.State), r.PID, s.r(r.Host), nanos(r.StartedAt), nanos(r.EndedAt), r.ExitCode, s.r(r.Message), s.r(r.Proc))
	if err != nil {
		return fmt.Errorf("state: create run %q: %w", s.r(r.ID), err)
	}
	return nil
}

// UpdateRun sets the state, end time, exit code and message of run id.
func (s *Store) UpdateRun(ctx context.Context, id string, u RunUpdate) error {
	if err := s.writable("update run"); err != nil {
		return err
	}
	res, err := s.st.updateRun.ExecContext(ctx, s.r(u.State), nanos(u.EndedAt), u.ExitCode, s.r(u.Message), s.r(id))
	if err == nil {
		err = mustAffect(res, "run")
	}
	if err != nil {
		return fmt.Errorf("state: update run %q: %w", s.r(id), err)
	}
	return nil
}

// SetRunOwner records that process pid on host, told apart from others
// that had its pid by proc (Run.Proc), now owns run id, as when `apply
// --resume` takes over a run that another process started.
func (s *Store) SetRunOwner(ctx context.Context, id string, pid int, host, proc string) error {
	if err := s.writable("set run owner"); err != nil {
		return err
	}
	res, err := s.st.setRunOwner.ExecContext(ctx, pid, s.r(host), s.r(proc), s.r(id))
	if err == nil {
		err = mustAffect(res, "run")
	}
	if err != nil {
		return fmt.Errorf("state: set owner of run %q: %w", s.r(id), err)
	}
	return nil
}

// Run returns run id, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(s.st.run.QueryRowContext(ctx, s.r(id)))
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("run %q: %w", s.r(id), ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("state: %w", err)
	}
	return r, nil
}

// LatestRun returns the run created last, or an error wrapping ErrNotFound
// when there is none.
func (s *Store) LatestRun(ctx context.Context) (Run, error) {
	r, err := scanRun(s.st.latestRun.QueryRowContext(ctx))
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("no run: %w", ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("state: %w", err)
	}
	return r, nil
}

// Runs returns every run, newest first.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rows, err := s.st.runs.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("state: runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("state: runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: runs: %w", err)
	}
	return out, nil
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (Run, error) {
	var (
		r              Run
		vars           string
		started, ended sql.NullInt64
	)
	err := sc.Scan(&r.ID, &r.Name, &r.PlanFile, &r.PlanHash, &vars, &r.State, &r.PID, &r.Host,
		&started, &ended, &r.ExitCode, &r.Message, &r.Proc)
	if err != nil {
		return Run{}, err
	}
	if r.Vars, err = decodeMap(vars); err != nil {
		return Run{}, fmt.Errorf("run %q vars: %w", r.ID, err)
	}
	r.StartedAt, r.EndedAt = fromNanos(started), fromNanos(ended)
	return r, nil
}
