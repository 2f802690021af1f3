package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Resource kinds.
const (
	KindInstance = "instance"
	KindJob      = "job"
)

// Resource states. Everything but ResourceDeleted may still exist.
const (
	ResourceIntent       = "intent"
	ResourceCreated      = "created"
	ResourceDeleted      = "deleted"
	ResourceDeleteFailed = "delete-failed"
	// ResourceStopped: an instance stopped instead of deleted (a results
	// upload on it failed); it still exists.
	ResourceStopped = "stopped"
	// ResourceKept: an instance kept by keep: true; it still exists.
	ResourceKept = "kept"
)

// Resource is something a run creates outside taoflow and must remove: an
// instance, a container, a host process, a job, a registry login. It is
// recorded as an intent before it is created, so that a crash between the
// two still leaves a record to reconcile.
type Resource struct {
	ID        int64             `json:"id"` // assigned by RecordIntent
	RunID     string            `json:"run_id"`
	Kind      string            `json:"kind"` // one of the Kind* constants
	Name      string            `json:"name"` // the name the platform knows it by
	Instance  string            `json:"instance,omitempty"`
	Platform  string            `json:"platform"`
	State     string            `json:"state"`          // one of the Resource* constants
	Data      map[string]string `json:"data,omitempty"` // platform details, e.g. a container id; nil when empty
	CreatedAt time.Time         `json:"created_at"`     // when the intent was recorded
	UpdatedAt time.Time         `json:"updated_at"`
	Message   string            `json:"message,omitempty"` // why deleting it failed
}

// RecordIntent records that r is about to be created and returns its id.
// r.ID, r.State and the times are ignored. Recording the same run, kind and
// name again (a retry, a resume) returns the existing id; a resource already
// deleted is set back to intent with r's instance, platform and data, while
// one that may still exist is left as it is.
func (s *Store) RecordIntent(ctx context.Context, r Resource) (int64, error) {
	if err := s.writable("record intent"); err != nil {
		return 0, err
	}
	run, kind, name := s.r(r.RunID), s.r(r.Kind), s.r(r.Name)
	now := s.now().UnixNano()
	_, err := s.st.recordIntent.ExecContext(ctx, run, kind, name, s.r(r.Instance), s.r(r.Platform),
		s.encodeMap(r.Data), now, now)
	var id int64
	if err == nil {
		// The key never changes and rows are never removed, so this finds
		// the row the insert made or kept.
		err = s.st.resourceID.QueryRowContext(ctx, run, kind, name).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("state: record intent for %s %q of run %q: %w", kind, name, run, err)
	}
	return id, nil
}

// MarkCreated records that resource id now exists, merging data into the
// resource's Data.
func (s *Store) MarkCreated(ctx context.Context, id int64, data map[string]string) error {
	return s.mark(ctx, "mark created", id, s.st.markCreated, s.encodeMap(data), s.now().UnixNano(), id)
}

// MarkDeleted records that resource id is gone.
func (s *Store) MarkDeleted(ctx context.Context, id int64) error {
	return s.mark(ctx, "mark deleted", id, s.st.markDeleted, s.now().UnixNano(), id)
}

// MarkFailed records that deleting resource id failed with msg; the resource
// counts as alive.
func (s *Store) MarkFailed(ctx context.Context, id int64, msg string) error {
	return s.mark(ctx, "mark failed", id, s.st.markFailed, s.now().UnixNano(), s.r(msg), id)
}

func (s *Store) mark(ctx context.Context, op string, id int64, st *sql.Stmt, args ...any) error {
	if err := s.writable(op); err != nil {
		return err
	}
	res, err := st.ExecContext(ctx, args...)
	if err == nil {
		err = mustAffect(res, fmt.Sprintf("resource %d", id))
	}
	if err != nil {
		return fmt.Errorf("state: %s: %w", op, err)
	}
	return nil
}

// MarkStopped records that instance id was stopped instead of deleted,
// with why; it may still be removed (destroy).
func (s *Store) MarkStopped(ctx context.Context, id int64, msg string) error {
	return s.mark(ctx, "mark stopped", id, s.st.markState, ResourceStopped, s.now().UnixNano(), s.r(msg), id)
}

// MarkKept records that instance id was kept on purpose (keep: true), with
// why; it may still be removed (destroy).
func (s *Store) MarkKept(ctx context.Context, id int64, msg string) error {
	return s.mark(ctx, "mark kept", id, s.st.markState, ResourceKept, s.now().UnixNano(), s.r(msg), id)
}

// Resource returns resource id, or an error wrapping ErrNotFound.
func (s *Store) Resource(ctx context.Context, id int64) (Resource, error) {
	rs, err := s.queryResources(ctx, "resource", s.st.resource, id)
	if err != nil {
		return Resource{}, err
	}
	if len(rs) == 0 {
		return Resource{}, fmt.Errorf("state: resource %d: %w", id, ErrNotFound)
	}
	return rs[0], nil
}

// Resources returns every resource of run in the order they were recorded.
func (s *Store) Resources(ctx context.Context, run string) ([]Resource, error) {
	return s.queryResources(ctx, "resources", s.st.resources, s.r(run))
}

// Alive returns the resources of run that may still exist: those in state
// intent, created or delete-failed.
func (s *Store) Alive(ctx context.Context, run string) ([]Resource, error) {
	return s.queryResources(ctx, "alive resources", s.st.alive, s.r(run))
}

// AliveAll returns the resources of every run that may still exist.
func (s *Store) AliveAll(ctx context.Context) ([]Resource, error) {
	return s.queryResources(ctx, "alive resources", s.st.aliveAll)
}

func (s *Store) queryResources(ctx context.Context, what string, st *sql.Stmt, args ...any) ([]Resource, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w", what, err)
	}
	defer rows.Close()
	var out []Resource
	for rows.Next() {
		var (
			r                Resource
			data             string
			created, updated sql.NullInt64
		)
		err := rows.Scan(&r.ID, &r.RunID, &r.Kind, &r.Name, &r.Instance, &r.Platform, &r.State,
			&data, &created, &updated, &r.Message)
		if err == nil {
			r.Data, err = decodeMap(data)
		}
		if err != nil {
			return nil, fmt.Errorf("state: %s: %w", what, err)
		}
		r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: %s: %w", what, err)
	}
	return out, nil
}
