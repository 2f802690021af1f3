// Package platform defines how taoflow reaches the machines a plan runs on.
//
// A Platform runs one shell script on one Instance and reports its output and
// exit code; that is the only thing every platform must do. Lifecycle
// abilities — Creator, Deleter, Stopper, Lister, Closer — are separate small
// interfaces that a platform implements where it has them, and callers find
// them by type assertion. The implementations live in sub-packages (local,
// ssh, brev) so that the engine and the steps depend only on this package,
// which imports nothing but the standard library.
//
// A non-zero exit code is a result, not an error: errors are for failures of
// the transport (an ExecError, which says whether a retry may help), for
// lifecycle calls on things that are gone (ErrNotFound), and for a cancelled
// context. Every word inserted into a script must pass through
// shellquote.Quote (internal/shellquote), the one quoting function.
//
// A script is never an argument of a process, on any platform: the kernel
// caps one at 128 KiB, and other users can read argv. Each transport
// carries a short fixed command line and sends the script on a pipe, on
// stdin ahead of the job's stdin, or in pieces (script.go, and
// docs/design.md §6.0); CheckScript states the one limit left, MaxScript.
package platform
