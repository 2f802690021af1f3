// Package state owns taoflow's record of what a run did and what it may have
// left behind: runs, the nodes of their graphs, the resources they created,
// the event stream, the per-node log files and the metric series a run's
// jobs reported (series.go: bounded, thinned evenly beyond MaxPoints).
//
// It exists so that teardown survives the process: every resource is recorded
// as an intent before it is created, then marked created, then deleted, so
// that `taoflow destroy RUN` and `apply --resume` can find everything after a
// crash. The store is an embedded SQLite database (dir/state.db, WAL mode) so
// that `status` and `logs` can read with OpenReadOnly while `apply` writes;
// node logs are plain files under dir/runs/<run>/logs, and what an apply
// with no terminal prints (apply --detach) goes to dir/runs/<run>/apply.log
// (OpenApplyLog).
//
// Every string the store writes, to the database or to a log file, first
// passes through the redactor given with WithRedactor, so that secret values
// never reach the disk; a node's progress figures (Node.ProgressFigures)
// are stored as JSON, each of their texts redacted first. The store imports
// nothing else from taoflow but internal/progress, the figures' type.
//
// The schema is versioned (PRAGMA user_version) and Open migrates an older
// one; a migration may fill what it adds from what was recorded before:
// version 5 reads the figures of each node's stored progress line once
// (oldprogress.go), the only place a progress line is read back.
package state
