// Package steps turns the `with:` of each node into shell scripts run on an
// instance through a platform.Platform: the seven step kinds of DESIGN §4.
//
// It owns what is said to an instance and how its answers are read, so that
// the engine only schedules and the platforms only transport. Every word
// inserted into a script passes through plan.ShellQuote, a leading ~/ is
// written as "$HOME"/rest (never eval'd), and secrets reach a script only on
// Exec's stdin: a prelude reads one line per secret and exports it for that
// one command (see secretEnv). No secret value is ever part of a script, an
// argv, a log line written here or an error.
//
// Jobs (the `run` kind) go through a small runtime interface with verbs
// submit, status (a batch of jobs, with their new log bytes and TAO progress,
// in one round trip), cancel and cleanup. The process runtime supervises a
// host process in a job directory ~/.taoflow/jobs/<job>/ on the instance
// (cmd.sh, pid, log, rc, canceled); a container runtime slots in beside it.
//
// Failures a user can act on are *Error values with a class ("job failed",
// "not reachable", "verification mismatch", ...); a cancelled context is
// returned as its cause.
package steps
