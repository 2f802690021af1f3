// Package state owns taoflow's record of what a run did and what it may have
// left behind: runs, the nodes of their graphs, the resources they created,
// the event stream and the per-node log files.
//
// It exists so that teardown survives the process: every resource is recorded
// as an intent before it is created, then marked created, then deleted, so
// that `taoflow destroy RUN` and `apply --resume` can find everything after a
// crash. The store is an embedded SQLite database (dir/state.db, WAL mode) so
// that `status` and `logs` can read with OpenReadOnly while `apply` writes;
// node logs are plain files under dir/runs/<run>/logs.
//
// Every string the store writes, to the database or to a log file, first
// passes through the redactor given with WithRedactor, so that secret values
// never reach the disk. The store imports nothing else from taoflow.
package state
