package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Event is one entry of a run's event stream, as the engine emits it.
type Event struct {
	Seq     int64 // assigned by AppendEvent, increasing across the store
	RunID   string
	Time    time.Time // AppendEvent uses the current time when zero
	Type    string
	Node    string
	Message string
	Data    map[string]string // nil when empty
}

// AppendEvent adds e to its run's event stream and returns its Seq.
func (s *Store) AppendEvent(ctx context.Context, e Event) (int64, error) {
	if err := s.writable("append event"); err != nil {
		return 0, err
	}
	t := e.Time
	if t.IsZero() {
		t = s.now()
	}
	res, err := s.st.appendEvent.ExecContext(ctx, s.r(e.RunID), t.UnixNano(), s.r(e.Type), s.r(e.Node),
		s.r(e.Message), s.encodeMap(e.Data))
	var seq int64
	if err == nil {
		seq, err = res.LastInsertId()
	}
	if err != nil {
		return 0, fmt.Errorf("state: append event to run %q: %w", s.r(e.RunID), err)
	}
	return seq, nil
}

// Events returns at most limit events of run with Seq greater than
// afterSeq, oldest first; limit <= 0 means no limit. Following a run is
// calling it again with the last Seq seen.
func (s *Store) Events(ctx context.Context, run string, afterSeq int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.st.events.QueryContext(ctx, s.r(run), afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("state: events of run %q: %w", s.r(run), err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			e    Event
			t    sql.NullInt64
			data string
		)
		err := rows.Scan(&e.Seq, &e.RunID, &t, &e.Type, &e.Node, &e.Message, &data)
		if err == nil {
			e.Data, err = decodeMap(data)
		}
		if err != nil {
			return nil, fmt.Errorf("state: events of run %q: %w", s.r(run), err)
		}
		e.Time = fromNanos(t)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: events of run %q: %w", s.r(run), err)
	}
	return out, nil
}
