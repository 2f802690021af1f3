// Package brevtest runs a fake `brev` CLI for tests of the brev platform.
//
// The Brev service cannot run here, so the platform's tests talk to a fake
// binary (./fakebrev) instead: a real process on PATH, parsing its argv with
// cobra as the real one does, keeping a fake cloud of instances in a state
// directory and reaching them through a real sshd (sshtest). It reproduces
// the real CLI's quirks, as collected in docs/design.md §6.1,
// because a client that is naive about them must fail here as it would in
// production:
//
//   - exit codes are only ever 0 or 1;
//   - exec/delete/stop/start/create read stdin to EOF as extra names (or
//     types) when it is not a char device: a client that passes a pipe
//     hangs or acts on the wrong instances;
//   - exec takes its last argument as the command and parses flags
//     anywhere (`exec box ls -la` is a flag error), fires ssh at the
//     literal alias first, treats any non-zero exit as a connection
//     failure, refreshes and runs the command a second time, and echoes
//     the instance name to a piped stdout;
//   - `ssh <name>` works only after a refresh that saw the instance
//     RUNNING; time passes only when someone runs `ls` (one tick each);
//   - a deleted name stays taken while DELETING; delete of an unknown
//     name fails with "not found"; start of an unknown name "succeeds";
//   - `search` lists a catalogue of types with GPU, count, VRAM, disk,
//     stoppability, boot time and price_per_hour as the real one does (a
//     JSON array, [] for no match, a case-insensitive substring GPU
//     filter, no GPU-count filter, cheapest first, an unknown --sort an
//     error); create skips a type it does not know or that has no capacity
//     (gpu_1x_h100_pcie, Options.OutOfCapacity) and tries the next; stop
//     refuses a type that cannot be stopped (v0.6.327+); every deleted
//     instance leaves a Bill (create to delete) to check cost figures by;
//   - faults (Inject) make orphans after a failed create, instances that
//     fail or never finish deploying, transient ssh and API errors.
//
// Every invocation is logged (Calls): argv, names, whether stdin was
// piped, exit code, timing, and whether a refresh overlapped another, so
// tests can assert how a client drove the CLI as well as what it left
// behind (Instances, Alive, CheckNoneAlive).
package brevtest
