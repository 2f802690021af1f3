// Command trainer behaves like a TAO Toolkit training container, for tests.
//
// It runs a number of fake epochs. Each epoch prints a log line, appends one
// line to <results>/status.json in the format of TAO's status logger (JSON
// lines, Python json.dumps separators, epoch counted from 1) and writes a
// checkpoint model_epoch_<EEE>_step_<SSSSS>.pth; every write is synced. The
// last epoch line of a successful run has status SUCCESS, earlier ones
// RUNNING. A failure (-fail-code, -fail-at) appends one FAILURE line and
// exits with the code.
//
// Flags (each may also come from the environment as TRAINER_<FLAG>, with '-'
// as '_', for example TRAINER_EPOCHS=3; a flag on the command line wins):
//
//	-epochs N        epochs to run (default 2)
//	-sleep DUR       time per epoch (default 100ms)
//	-results DIR     results directory (default /results)
//	-fail-code N     exit N after the epochs (or at -fail-at)
//	-fail-at K       fail after K epochs completed (code -fail-code, else 1)
//	-ignore-term     ignore SIGTERM (docker stop then needs SIGKILL: 137)
//	-oom-mb N        allocate and touch N MiB before the first epoch
//	-print-env NAME  print "NAME has N bytes" or "NAME is unset" (repeatable);
//	                 never the value
//	-hang            after the epochs, wait for a signal instead of exiting
//
// SIGTERM (unless ignored) ends it with exit code 143 at once.
package main
