package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxPoints bounds the points kept of one series: one metric of one cell
// of a run. Beyond it the series is thinned evenly (see AppendPoints).
const MaxPoints = 4096

// Point is one metric value a job reported: of which cell (the matrix
// cell's id, or the node's id where the node has no cell), by which node,
// at which epoch or step, when, and what.
type Point struct {
	// Cell is the series' owner: the node's matrix cell, or the node id
	// itself when it has none.
	Cell string `json:"cell"`
	// Node is the node that reported the point (a wait node, for a run
	// step's job).
	Node   string    `json:"node,omitempty"`
	Epoch  *float64  `json:"epoch,omitempty"`
	Step   *int64    `json:"step,omitempty"`
	Time   time.Time `json:"time"`
	Metric string    `json:"metric"`
	Value  float64   `json:"value"`
	// Seq is the point's arrival number in its series (0 for the first),
	// assigned by AppendPoints; it stays increasing through thinning.
	Seq int64 `json:"-"`
}

// seriesKey names one series of a run.
type seriesKey struct{ cell, metric string }

// keptAfter is how many points a series holds once the point with arrival
// number k is in, when every stride-th arrival is kept and the newest.
func keptAfter(k, stride int64) int64 {
	n := k/stride + 1
	if k%stride != 0 {
		n++
	}
	return n
}

// strideFor is the smallest power of two whose grid keeps the series
// within MaxPoints after arrival k. It never decreases as k grows, so what
// it dropped is never wanted back.
func strideFor(k int64) int64 {
	s := int64(1)
	for keptAfter(k, s) > MaxPoints {
		s *= 2
	}
	return s
}

// AppendPoints adds pts to run's series, in one transaction: a reader
// (OpenReadOnly) sees all of them or none. A point without a time gets the
// current time; one whose value is NaN or infinite is dropped (JSON has no
// such numbers).
//
// Each series (run, cell, metric) keeps at most MaxPoints: the arrivals
// whose number is a multiple of a stride, and always the first and the
// newest. The stride starts at 1 and doubles whenever the series would
// exceed the bound, which drops every other kept point: the series stays
// evenly spaced over the whole run, however long, at between MaxPoints/2
// and MaxPoints points.
func (s *Store) AppendPoints(ctx context.Context, run string, pts []Point) (err error) {
	if err := s.writable("append points"); err != nil {
		return err
	}
	if len(pts) == 0 {
		return nil
	}
	run = s.r(run)
	defer func() {
		if err != nil {
			err = fmt.Errorf("state: append points to run %q: %w", run, err)
		}
	}()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	// Each series' points of this batch, in order; of them only those
	// the series keeps once the batch is in are written.
	var (
		order []seriesKey
		batch = map[seriesKey][]Point{}
	)
	for _, p := range pts {
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			continue
		}
		key := seriesKey{s.r(p.Cell), s.r(p.Metric)}
		if _, ok := batch[key]; !ok {
			order = append(order, key)
		}
		batch[key] = append(batch[key], p)
	}
	ins := tx.StmtContext(ctx, s.st.insertPoint)
	del := tx.StmtContext(ctx, s.st.deletePoint)
	thin := tx.StmtContext(ctx, s.st.thinSeries)
	last := tx.StmtContext(ctx, s.st.lastPoint)
	for _, key := range order {
		var k0 int64 // the arrival number of the batch's first point
		var max sql.NullInt64
		if err := last.QueryRowContext(ctx, run, key.cell, key.metric).Scan(&max); err != nil {
			return err
		}
		if max.Valid {
			k0 = max.Int64 + 1
		}
		ps := batch[key]
		end := k0 + int64(len(ps)) - 1 // the newest arrival
		stride := strideFor(end)
		switch prev := k0 - 1; {
		case k0 > 0 && stride != strideFor(prev):
			// The stride doubled: every other point goes.
			if _, err := thin.ExecContext(ctx, run, key.cell, key.metric, stride); err != nil {
				return err
			}
		case prev > 0 && prev%stride != 0:
			// The newest point until now was kept as the newest only.
			if _, err := del.ExecContext(ctx, run, key.cell, key.metric, prev); err != nil {
				return err
			}
		}
		for i, p := range ps {
			k := k0 + int64(i)
			if k%stride != 0 && k != end {
				continue
			}
			t := p.Time
			if t.IsZero() {
				t = s.now()
			}
			var epoch, step any
			if p.Epoch != nil && !math.IsNaN(*p.Epoch) && !math.IsInf(*p.Epoch, 0) {
				epoch = *p.Epoch
			}
			if p.Step != nil {
				step = *p.Step
			}
			if _, err := ins.ExecContext(ctx, run, key.cell, key.metric, k, s.r(p.Node), epoch, step, t.UnixNano(), p.Value); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// Series returns every point of run's series, by cell, then metric, then
// arrival; nil when the run has none. It reads one snapshot: a batch that
// AppendPoints is writing meanwhile is in it whole or not at all.
func (s *Store) Series(ctx context.Context, run string) ([]Point, error) {
	rows, err := s.st.series.QueryContext(ctx, s.r(run))
	if err != nil {
		return nil, fmt.Errorf("state: series of run %q: %w", s.r(run), err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var (
			p     Point
			epoch sql.NullFloat64
			step  sql.NullInt64
			t     int64
		)
		if err := rows.Scan(&p.Cell, &p.Metric, &p.Seq, &p.Node, &epoch, &step, &t, &p.Value); err != nil {
			return nil, fmt.Errorf("state: series of run %q: %w", s.r(run), err)
		}
		if epoch.Valid {
			p.Epoch = &epoch.Float64
		}
		if step.Valid {
			p.Step = &step.Int64
		}
		p.Time = time.Unix(0, t).UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: series of run %q: %w", s.r(run), err)
	}
	return out, nil
}
