package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/internal/progress"
)

// fillProgressFigures gives the nodes recorded before schema version 5,
// which have a progress line and no figures, the figures their line says,
// so that status --json shows them as it did when it read them from the
// line. Nodes recorded since carry the figures the step reported; nothing
// else reads a line back.
func fillProgressFigures(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, progress FROM nodes WHERE progress != '' AND progress_figures = ''`)
	if err != nil {
		return err
	}
	type row struct {
		seq  int64
		line string
	}
	var todo []row
	for rows.Next() {
		var r row
		if err = rows.Scan(&r.seq, &r.line); err != nil {
			break
		}
		todo = append(todo, r)
	}
	if err = errors.Join(err, rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, r := range todo {
		b, err := json.Marshal(oldProgressFigures(r.line))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET progress_figures = ? WHERE seq = ?`, string(b), r.seq); err != nil {
			return err
		}
	}
	return nil
}

// oldProgressFigures reads a progress line as taoflow wrote it before
// schema version 5 ("[JOB] epoch 3/10 loss 0.21 eta 0:04:00"; JOB when the
// wait waited for several jobs). A line not in that form is all Message.
// Frozen: it reads what old versions stored, and only fillProgressFigures
// calls it.
func oldProgressFigures(line string) progress.Figures {
	var p progress.Figures
	rest := line
	if strings.HasPrefix(rest, "[") {
		if i := strings.Index(rest, "] "); i > 0 {
			p.Job, rest = rest[1:i], rest[i+2:]
		}
	}
	f := strings.Fields(rest)
	i := 0
	ok := true
	if i < len(f) && f[i] == "epoch" && i+1 < len(f) {
		ep, maxEp, hasMax := strings.Cut(f[i+1], "/")
		p.Epoch = oldFloat(ep)
		if hasMax {
			p.MaxEpoch = oldFloat(maxEp)
			ok = ok && p.MaxEpoch != nil
		}
		ok = ok && p.Epoch != nil
		i += 2
	}
	if i+1 < len(f) && f[i] != "eta" {
		p.Metric, p.Value = f[i], oldFloat(f[i+1])
		ok = ok && p.Value != nil
		if progress.IsLoss(p.Metric) {
			p.Loss = p.Value
		}
		i += 2
	}
	if i < len(f) && f[i] == "eta" {
		p.ETA = strings.Join(f[i+1:], " ")
		i = len(f)
	}
	if !ok || i < len(f) || i == 0 {
		return progress.Figures{Job: p.Job, Message: rest}
	}
	return p
}

func oldFloat(s string) *float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
