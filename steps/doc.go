// Package steps turns the `with:` of each node into shell scripts run on an
// instance through a platform.Platform: the ten step kinds of docs/design.md §5.
//
// It owns what is said to an instance and how its answers are read, so that
// the engine only schedules and the platforms only transport. The remote
// shell lives in scripts/*.sh (embedded, checked by shellcheck -s sh in
// make lint), each file naming its parameters in its header; script()
// (script.go) sends a prelude of quoted assignments (shellquote.Quote), so
// no value is ever part of a script's text, and a list travels as one
// parameter of quoted words that the script reads with eval set --
// (words). A path's leading ~/ is read as $HOME by scripts/home.sh (never
// eval'd), and secrets reach a script only on
// Exec's stdin: a prelude reads one line per secret and exports it for that
// one command (see secretEnv). No secret value is ever part of a script, an
// argv, a log line written here or an error.
//
// The files: steps.go (Do, exec, errors), one file per step kind
// (preflight.go, ngcauth.go, pull.go, run.go with progress.go and
// metrics.go, upload.go with s3.go and checksums.go, delete.go), the job
// runtimes (runtime.go; process.go; docker.go, the container runtime's
// orchestration, and dockerstatus.go, the pure reading of what its poll
// prints), script.go and scripts/, and preview.go (`taoflow plan
// --commands`).
//
// Jobs (the `run` kind) go through a small runtime interface with verbs
// submit, status (a batch of jobs, with their new log bytes and TAO progress,
// in one round trip), cancel and cleanup. The process runtime supervises a
// host process in a job directory ~/.taoflow/jobs/<job>/ on the instance
// (cmd.sh, pid, log, rc, canceled), starting as few processes as it can:
// builtins (read, kill, parameter expansion) wherever they give the same
// answer, one date and one wc per poll for all jobs (BenchmarkProcessJob
// counts them; docs/benchmarks.md). The docker runtime (docker.go) runs a
// container named after the job, labelled tao-job=<job> and
// taoflow.run=<run>: docker run -d (adopting a container that exists, by
// name or label), one docker inspect per instance per poll for all its
// containers, the log from a byte offset of a copy a follower (docker logs
// -f, one per job) keeps in the job directory, docker stop then docker rm -f
// on cancel (after the last log lines are read), and removal by the run's
// label in Cleanup. A cancel by taoflow leaves ~/.taoflow/jobs/<job>/canceled
// with either runtime, so exit codes 137/143 read as canceled.
//
// A wait reports progress as a progress.Report (progress.go): the line
// people read and its figures, each text redacted, built together from a
// status.json line, so that nothing downstream parses the line back. The
// report also brings the metric points for the run's series: one per
// loss and kpi of every status.json line written since the last poll
// (the status scripts print the file's end as @st lines), else of plain
// "epoch 3/10 loss 0.21" output lines (progress.ParseLine).
//
// A wait does not only poll on its interval: one watcher per instance
// (watch.go, scripts/watch.sh, streamed through platform.Streamer) reports
// the ends of that instance's jobs as lines and wakes the waits of those
// jobs, which poll at once. The watcher only says when to look; what a
// job's state is comes from the poll, so a missed line costs time, never
// correctness.
//
// The container kinds: ngc-auth (docker login with the key on stdin and the
// user name single-quoted, then docker manifest inspect of verify_image),
// pull (recording the digest through Request.Record) and upload-s3 to s3://
// (aws s3 sync, then a listing compared file by file with the source).
//
// The transfer kinds move trees between this machine and an instance:
// send (a tar archive built here, streamed over Exec's stdin into
// scripts/send.sh, which extracts it beside the destination, checks its
// counts and renames it into place), fetch (scripts/fetch.sh's archive
// read from platform.Streamer's stdout into an os.Root beside the
// destination, checked against a listing, renamed into place) and
// download-s3 (aws s3 sync or cp on the instance, checked against a
// listing of the source). Both ends compare listings first (tree.go), so
// a tree already there is not copied again.
//
// Failures a user can act on are *Error values with a class ("job failed",
// "not reachable", "verification mismatch", ...); a cancelled context is
// returned as its cause.
package steps
