package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RunRecord is what a run records about itself besides its state: the
// readable name given with `apply --name` (unique in the state; empty when
// none), its tags, and its provenance (a JSON object the runner fills: git
// commit, taoflow version, who ran apply where).
type RunRecord struct {
	RunID      string            `json:"-"`
	Label      string            `json:"run_name,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Provenance json.RawMessage   `json:"provenance,omitempty"`
}

// ErrNameTaken is returned (wrapped) by SetRunRecord when another run has
// the name already.
var ErrNameTaken = errors.New("run name already used")

// SetRunRecord records (or replaces) the record of run rec.RunID, which must
// exist. Every string in it, provenance included, passes through the
// redactor before it is encoded.
func (s *Store) SetRunRecord(ctx context.Context, rec RunRecord) error {
	if err := s.writable("set run record"); err != nil {
		return err
	}
	var label any
	if rec.Label != "" {
		label = s.r(rec.Label)
	}
	prov := "{}"
	if len(rec.Provenance) > 0 {
		var v any
		if err := json.Unmarshal(rec.Provenance, &v); err != nil {
			return fmt.Errorf("state: provenance of run %q: %w", s.r(rec.RunID), err)
		}
		b, err := json.Marshal(s.redactValue(v))
		if err != nil {
			return fmt.Errorf("state: provenance of run %q: %w", s.r(rec.RunID), err)
		}
		prov = string(b)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO run_records (run_id, label, tags, provenance) VALUES (?, ?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET label = excluded.label, tags = excluded.tags, provenance = excluded.provenance`,
		s.r(rec.RunID), label, s.encodeMap(rec.Tags), prov)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed: run_records.label") {
			return fmt.Errorf("state: run name %q: %w", s.r(rec.Label), ErrNameTaken)
		}
		return fmt.Errorf("state: set record of run %q: %w", s.r(rec.RunID), err)
	}
	return nil
}

// RunRecord returns the record of run id; a run without one has an empty
// record (no error).
func (s *Store) RunRecord(ctx context.Context, id string) (RunRecord, error) {
	row := s.db.QueryRowContext(ctx, `SELECT run_id, label, tags, provenance FROM run_records WHERE run_id = ?`, s.r(id))
	rec, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) || noRecords(err) {
		return RunRecord{RunID: id}, nil
	}
	if err != nil {
		return RunRecord{}, fmt.Errorf("state: record of run %q: %w", s.r(id), err)
	}
	return rec, nil
}

// RunRecords returns the records of every run that has one, by run id.
func (s *Store) RunRecords(ctx context.Context) (map[string]RunRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, label, tags, provenance FROM run_records`)
	if noRecords(err) {
		return map[string]RunRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: run records: %w", err)
	}
	defer rows.Close()
	out := map[string]RunRecord{}
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("state: run records: %w", err)
		}
		out[rec.RunID] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: run records: %w", err)
	}
	return out, nil
}

// RunByName returns the run named name with `apply --name`, or an error
// wrapping ErrNotFound.
func (s *Store) RunByName(ctx context.Context, name string) (Run, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT run_id FROM run_records WHERE label = ?`, s.r(name)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("state: run named %q: %w", s.r(name), ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("state: run named %q: %w", s.r(name), err)
	}
	return s.Run(ctx, id)
}

func scanRecord(sc scanner) (RunRecord, error) {
	var (
		rec        RunRecord
		label      sql.NullString
		tags, prov string
	)
	if err := sc.Scan(&rec.RunID, &label, &tags, &prov); err != nil {
		return RunRecord{}, err
	}
	rec.Label = label.String
	var err error
	if rec.Tags, err = decodeMap(tags); err != nil {
		return RunRecord{}, fmt.Errorf("run %q tags: %w", rec.RunID, err)
	}
	if prov != "{}" {
		rec.Provenance = json.RawMessage(prov)
	}
	return rec, nil
}

// redactValue redacts every string (and object key) of a decoded JSON
// value, before it is encoded again, so that escaping cannot hide a secret.
func (s *Store) redactValue(v any) any {
	switch v := v.(type) {
	case string:
		return s.r(v)
	case []any:
		for i := range v {
			v[i] = s.redactValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[s.r(k)] = s.redactValue(x)
		}
		return out
	}
	return v
}

// noRecords tells the error of a read-only store opened on a state made
// before run records existed (only Open migrates).
func noRecords(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table: run_records")
}
