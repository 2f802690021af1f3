package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations[i] takes the schema from version i to i+1; the version is kept
// in PRAGMA user_version. Append to this list, never edit an entry.
var migrations = []string{
	// 1: runs, nodes, resources, events, log index.
	`
CREATE TABLE runs (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT    NOT NULL UNIQUE,
	name       TEXT    NOT NULL,
	plan_file  TEXT    NOT NULL,
	plan_hash  TEXT    NOT NULL,
	vars       TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	pid        INTEGER NOT NULL,
	host       TEXT    NOT NULL,
	started_at INTEGER,
	ended_at   INTEGER,
	exit_code  INTEGER NOT NULL,
	message    TEXT    NOT NULL
);
CREATE TABLE nodes (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id     TEXT    NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	id         TEXT    NOT NULL,
	step       TEXT    NOT NULL,
	instance   TEXT    NOT NULL,
	cell       TEXT    NOT NULL,
	finally    INTEGER NOT NULL,
	state      TEXT    NOT NULL,
	attempts   INTEGER NOT NULL,
	started_at INTEGER,
	ended_at   INTEGER,
	exit_code  INTEGER,
	message    TEXT    NOT NULL,
	progress   TEXT    NOT NULL,
	UNIQUE (run_id, id)
);
CREATE TABLE resources (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id     TEXT    NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	kind       TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	instance   TEXT    NOT NULL,
	platform   TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	data       TEXT    NOT NULL,
	created_at INTEGER,
	updated_at INTEGER,
	message    TEXT    NOT NULL,
	UNIQUE (run_id, kind, name)
);
CREATE INDEX resources_state ON resources (state);
CREATE TABLE events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id  TEXT    NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	time    INTEGER NOT NULL,
	type    TEXT    NOT NULL,
	node    TEXT    NOT NULL,
	message TEXT    NOT NULL,
	data    TEXT    NOT NULL
);
CREATE INDEX events_run ON events (run_id, seq);
CREATE TABLE logs (
	run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	node   TEXT NOT NULL,
	path   TEXT NOT NULL,
	PRIMARY KEY (run_id, node)
);
`,
	// 2: facts a node's step learned (the digest an image was pulled at).
	`ALTER TABLE nodes ADD COLUMN facts TEXT NOT NULL DEFAULT '{}';`,
	// 3: which process owns a run, beyond its pid (Run.Proc).
	`ALTER TABLE runs ADD COLUMN proc TEXT NOT NULL DEFAULT '';`,
	// 4: a run's records: its readable name (unique), tags and provenance.
	`
CREATE TABLE run_records (
	run_id     TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
	label      TEXT UNIQUE,
	tags       TEXT NOT NULL,
	provenance TEXT NOT NULL
);
`,
	// 5: a node's progress figures (JSON, '' for none) beside its line;
	// fills[5] reads them from the lines of nodes recorded before.
	`ALTER TABLE nodes ADD COLUMN progress_figures TEXT NOT NULL DEFAULT '';`,
	// 6: metric series, a point per metric value a job reported
	// (series.go): seq is its arrival number in (run_id, cell, metric).
	`
CREATE TABLE IF NOT EXISTS series (
	run_id TEXT    NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	cell   TEXT    NOT NULL,
	metric TEXT    NOT NULL,
	seq    INTEGER NOT NULL,
	node   TEXT    NOT NULL,
	epoch  REAL,
	step   INTEGER,
	time   INTEGER NOT NULL,
	value  REAL    NOT NULL,
	PRIMARY KEY (run_id, cell, metric, seq)
) WITHOUT ROWID;
`,
}

// fills[v] runs after migrations[v-1], in the same transaction, to fill
// what version v added from what earlier versions recorded. Append, never
// edit.
var fills = map[int]func(context.Context, *sql.Tx) error{
	5: fillProgressFigures,
}

// migrate brings db's schema up to the newest version in one immediate
// transaction, so that two processes opening a new directory at once do not
// both create the tables.
func migrate(ctx context.Context, db *sql.DB) (err error) {
	tx, err := db.BeginTx(ctx, nil) // immediate: see _txlock in Open
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this taoflow knows (%d)", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
		}
		if fill := fills[v+1]; fill != nil {
			if err := fill(ctx, tx); err != nil {
				return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
			}
		}
	}
	// PRAGMA takes no bound parameters; v is an int we own.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return err
	}
	return tx.Commit()
}

// stmts are the store's prepared statements.
type stmts struct {
	createRun, updateRun, setRunOwner, run, runs, latestRun     *sql.Stmt
	putNode, node, nodes, setNodeFact                           *sql.Stmt
	recordIntent, resourceID, markCreated, markDeleted          *sql.Stmt
	markFailed, markState, resource, resources, alive, aliveAll *sql.Stmt
	appendEvent, events, indexLog, logNodes                     *sql.Stmt
	insertPoint, deletePoint, thinSeries, lastPoint, series     *sql.Stmt
	all                                                         []*sql.Stmt
}

const (
	runCols      = `id, name, plan_file, plan_hash, vars, state, pid, host, started_at, ended_at, exit_code, message, proc`
	nodeCols     = `run_id, id, step, instance, cell, finally, state, attempts, started_at, ended_at, exit_code, message, progress, progress_figures, facts, seq`
	resourceCols = `id, run_id, kind, name, instance, platform, state, data, created_at, updated_at, message`
	eventCols    = `seq, run_id, time, type, node, message, data`
	aliveStates  = `('intent', 'created', 'delete-failed', 'stopped', 'kept')`
)

func (s *Store) prepare() error {
	list := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.st.createRun, `INSERT INTO runs (` + runCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.st.updateRun, `UPDATE runs SET state = ?, ended_at = ?, exit_code = ?, message = ? WHERE id = ?`},
		{&s.st.setRunOwner, `UPDATE runs SET pid = ?, host = ?, proc = ? WHERE id = ?`},
		{&s.st.run, `SELECT ` + runCols + ` FROM runs WHERE id = ?`},
		{&s.st.runs, `SELECT ` + runCols + ` FROM runs ORDER BY seq DESC`},
		{&s.st.latestRun, `SELECT ` + runCols + ` FROM runs ORDER BY seq DESC LIMIT 1`},

		{&s.st.putNode, `INSERT INTO nodes (run_id, id, step, instance, cell, finally, state, attempts, started_at, ended_at, exit_code, message, progress, progress_figures)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, id) DO UPDATE SET
				step = excluded.step, instance = excluded.instance, cell = excluded.cell,
				finally = excluded.finally, state = excluded.state, attempts = excluded.attempts,
				started_at = excluded.started_at, ended_at = excluded.ended_at,
				exit_code = excluded.exit_code, message = excluded.message, progress = excluded.progress,
				progress_figures = excluded.progress_figures`},
		{&s.st.setNodeFact, `UPDATE nodes SET facts = json_set(facts, ?, ?) WHERE run_id = ? AND id = ?`},
		{&s.st.node, `SELECT ` + nodeCols + ` FROM nodes WHERE run_id = ? AND id = ?`},
		{&s.st.nodes, `SELECT ` + nodeCols + ` FROM nodes WHERE run_id = ? ORDER BY seq`},

		// A conflicting intent reuses the row; only a deleted resource is
		// reset, since it is about to be created again.
		{&s.st.recordIntent, `INSERT INTO resources (run_id, kind, name, instance, platform, state, data, created_at, updated_at, message)
			VALUES (?, ?, ?, ?, ?, 'intent', ?, ?, ?, '')
			ON CONFLICT (run_id, kind, name) DO UPDATE SET
				instance = excluded.instance, platform = excluded.platform, state = 'intent',
				data = excluded.data, created_at = excluded.created_at,
				updated_at = excluded.updated_at, message = ''
			WHERE resources.state = 'deleted'`},
		{&s.st.resourceID, `SELECT id FROM resources WHERE run_id = ? AND kind = ? AND name = ?`},
		{&s.st.markCreated, `UPDATE resources SET state = 'created', data = json_patch(data, ?), updated_at = ?, message = '' WHERE id = ?`},
		{&s.st.markDeleted, `UPDATE resources SET state = 'deleted', updated_at = ?, message = '' WHERE id = ?`},
		{&s.st.markFailed, `UPDATE resources SET state = 'delete-failed', updated_at = ?, message = ? WHERE id = ?`},
		{&s.st.markState, `UPDATE resources SET state = ?, updated_at = ?, message = ? WHERE id = ?`},
		{&s.st.resource, `SELECT ` + resourceCols + ` FROM resources WHERE id = ?`},
		{&s.st.resources, `SELECT ` + resourceCols + ` FROM resources WHERE run_id = ? ORDER BY id`},
		{&s.st.alive, `SELECT ` + resourceCols + ` FROM resources WHERE run_id = ? AND state IN ` + aliveStates + ` ORDER BY id`},
		{&s.st.aliveAll, `SELECT ` + resourceCols + ` FROM resources WHERE state IN ` + aliveStates + ` ORDER BY id`},

		{&s.st.appendEvent, `INSERT INTO events (run_id, time, type, node, message, data) VALUES (?, ?, ?, ?, ?, ?)`},
		{&s.st.events, `SELECT ` + eventCols + ` FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`},
		{&s.st.indexLog, `INSERT OR IGNORE INTO logs (run_id, node, path) VALUES (?, ?, ?)`},
		{&s.st.logNodes, `SELECT node FROM logs WHERE run_id = ? ORDER BY rowid`},

		{&s.st.insertPoint, `INSERT INTO series (run_id, cell, metric, seq, node, epoch, step, time, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.st.deletePoint, `DELETE FROM series WHERE run_id = ? AND cell = ? AND metric = ? AND seq = ?`},
		{&s.st.thinSeries, `DELETE FROM series WHERE run_id = ? AND cell = ? AND metric = ? AND seq % ? != 0`},
		{&s.st.lastPoint, `SELECT MAX(seq) FROM series WHERE run_id = ? AND cell = ? AND metric = ?`},
		{&s.st.series, `SELECT cell, metric, seq, node, epoch, step, time, value FROM series WHERE run_id = ? ORDER BY cell, metric, seq`},
	}
	for _, p := range list {
		st, err := s.db.Prepare(p.sql)
		if err != nil {
			s.st.close()
			return fmt.Errorf("state: prepare: %w", err)
		}
		*p.dst = st
		s.st.all = append(s.st.all, st)
	}
	return nil
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	st.all = nil
	return errors.Join(errs...)
}
