package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
)

// Node is the recorded state of one node of a run's graph.
type Node struct {
	RunID     string    `json:"run_id"`
	ID        string    `json:"id"` // the node id, e.g. "train[lr=0.1]@gpu0"
	Step      string    `json:"step"`
	Instance  string    `json:"instance,omitempty"`
	Cell      string    `json:"cell,omitempty"`    // the matrix cell, if any
	Finally   bool      `json:"finally,omitempty"` // a finalizer
	State     string    `json:"state"`             // an engine.NodeState, kept as a plain string and not checked
	Attempts  int       `json:"attempts"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	ExitCode  *int      `json:"exit_code,omitempty"` // nil until the node's command has exited
	Message   string    `json:"message,omitempty"`
	Progress  string    `json:"progress,omitempty"` // e.g. "epoch 3/10 loss 0.21 eta 4m"
	// ProgressFigures are the figures of Progress, as the step reported
	// them; nil when it reported none. (status --json prints them as
	// progress_figures, after the node's facts.)
	ProgressFigures *progress.Figures `json:"-"`
	// Facts are what the node's step learned that a later step or person
	// needs, e.g. "digest" of the image a pull step pulled. PutNode leaves
	// them as they are; SetNodeFact adds one.
	Facts map[string]string `json:"facts,omitempty"`
	// Seq orders the nodes of the store by first PutNode. The store assigns
	// it; PutNode ignores it.
	Seq int64 `json:"seq"`
}

// PutNode records n, replacing the node with the same run and id if there
// is one. A replaced node keeps its Seq.
func (s *Store) PutNode(ctx context.Context, n Node) error {
	if err := s.writable("put node"); err != nil {
		return err
	}
	var exit any
	if n.ExitCode != nil {
		exit = *n.ExitCode
	}
	figures := ""
	if n.ProgressFigures != nil {
		b, err := json.Marshal(n.ProgressFigures.MapText(s.r))
		if err != nil {
			return fmt.Errorf("state: put node %q of run %q: %w", s.r(n.ID), s.r(n.RunID), err)
		}
		figures = string(b)
	}
	_, err := s.st.putNode.ExecContext(ctx,
		s.r(n.RunID), s.r(n.ID), s.r(n.Step), s.r(n.Instance), s.r(n.Cell), n.Finally,
		s.r(n.State), n.Attempts, nanos(n.StartedAt), nanos(n.EndedAt), exit, s.r(n.Message), s.r(n.Progress), figures)
	if err != nil {
		return fmt.Errorf("state: put node %q of run %q: %w", s.r(n.ID), s.r(n.RunID), err)
	}
	return nil
}

// SetNodeFact records a fact (key = value) the step of node id of run
// learned; the node must have been put before. key is lower-case letters,
// digits and '_'. The value passes through the redactor like every write.
func (s *Store) SetNodeFact(ctx context.Context, run, id, key, value string) error {
	if err := s.writable("set node fact"); err != nil {
		return err
	}
	if !factKeyRE.MatchString(key) {
		return fmt.Errorf("state: fact key %q: want lower-case letters, digits and '_'", key)
	}
	res, err := s.st.setNodeFact.ExecContext(ctx, "$."+key, s.r(value), s.r(run), s.r(id))
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = fmt.Errorf("node %q of run %q: %w", s.r(id), s.r(run), ErrNotFound)
		}
	}
	if err != nil {
		return fmt.Errorf("state: set fact %s of node %q: %w", key, s.r(id), err)
	}
	return nil
}

var factKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Node returns node id of run, or an error wrapping ErrNotFound.
func (s *Store) Node(ctx context.Context, run, id string) (Node, error) {
	n, err := scanNode(s.st.node.QueryRowContext(ctx, s.r(run), s.r(id)))
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("node %q of run %q: %w", s.r(id), s.r(run), ErrNotFound)
	}
	if err != nil {
		return Node{}, fmt.Errorf("state: %w", err)
	}
	return n, nil
}

// Nodes returns the nodes of run in the order they were first put.
func (s *Store) Nodes(ctx context.Context, run string) ([]Node, error) {
	rows, err := s.st.nodes.QueryContext(ctx, s.r(run))
	if err != nil {
		return nil, fmt.Errorf("state: nodes of run %q: %w", s.r(run), err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("state: nodes of run %q: %w", s.r(run), err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: nodes of run %q: %w", s.r(run), err)
	}
	return out, nil
}

func scanNode(sc scanner) (Node, error) {
	var (
		n              Node
		started, ended sql.NullInt64
		exit           sql.NullInt64
		facts, figures string
	)
	err := sc.Scan(&n.RunID, &n.ID, &n.Step, &n.Instance, &n.Cell, &n.Finally, &n.State, &n.Attempts,
		&started, &ended, &exit, &n.Message, &n.Progress, &figures, &facts, &n.Seq)
	if err != nil {
		return Node{}, err
	}
	if figures != "" {
		if err := json.Unmarshal([]byte(figures), &n.ProgressFigures); err != nil {
			return Node{}, fmt.Errorf("progress figures of node %q: %w", n.ID, err)
		}
	}
	if facts != "" && facts != "{}" {
		if err := json.Unmarshal([]byte(facts), &n.Facts); err != nil {
			return Node{}, fmt.Errorf("facts of node %q: %w", n.ID, err)
		}
	}
	n.StartedAt, n.EndedAt = fromNanos(started), fromNanos(ended)
	if exit.Valid {
		code := int(exit.Int64)
		n.ExitCode = &code
	}
	return n, nil
}
