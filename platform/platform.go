package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Instance is one machine a plan runs on, as the platform knows it.
type Instance struct {
	// Name is the plan's instance name, e.g. "gpu-a".
	Name string
	// Ref is the platform's address for it: a local sandbox directory, an
	// ssh destination, a brev instance name.
	Ref string
	// Created is true when this run created the instance, so it may delete it.
	Created bool
	// Attrs holds platform facts (instance type, run, ...).
	Attrs map[string]string
}

// Result is what one Exec produced. Stdout and Stderr may have been cut to a
// platform's capture limit (then they keep the tail and say so in a marker
// line at their start).
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the script's exit status; a script killed by signal N
	// reports 128+N, as a shell does. It is -1 when Exec returns an error.
	ExitCode int
}

// Spec describes an instance to create or adopt, as the plan states it.
type Spec struct {
	// Name is the plan's instance name.
	Name string
	// Type is the requested instance type (a comma-separated preference
	// list where the platform has types).
	Type string
	// Existing names an instance to reuse instead of creating one.
	Existing string
	// Host is an ssh destination ("user@host:port" or a config alias).
	Host string
	// Offers are what the platform's catalogue says of the types in Type
	// (a Searcher's answer), when known: Create reports the price and
	// stoppability of the type it got from them.
	Offers []Offer
}

// Platform runs commands on instances.
//
// Exec runs script with the instance's /bin/sh, as sh -c SCRIPT would run
// it, feeding it stdin; a nil stdin is empty. The script never travels as
// an argument (the kernel caps one at 128 KiB): any script that
// CheckScript accepts runs, up to MaxScript (see script.go). A non-zero exit is not an error: it is
// Result.ExitCode. The error is for transport failures (an *ExecError) and
// for cancellation of ctx (an error wrapping context.Cause(ctx)).
type Platform interface {
	Kind() string
	Exec(ctx context.Context, inst Instance, script string, stdin io.Reader) (Result, error)
}

// Creator is a Platform that can create (or adopt) instances for a run.
type Creator interface {
	Create(ctx context.Context, run string, spec Spec) (Instance, error)
}

// Adopter is a Creator that can take back an instance it created for run
// earlier (a resumed run), under its Ref, without creating another: it
// checks the instance is there and ready, and returns it Created.
type Adopter interface {
	Adopt(ctx context.Context, run string, spec Spec, ref string) (Instance, error)
}

// Checker is a Platform that can tell, before a run starts anything,
// whether it can work at all (its CLI installed, new enough, ...). Check
// returns what it found, e.g. the CLI's version.
type Checker interface {
	Check(ctx context.Context) (string, error)
}

// Namer is a Creator whose instances' Refs follow from the run and the
// spec, so the Ref can be recorded before Create (a process killed during
// Create leaves a name that destroy and reap can find).
type Namer interface {
	InstanceRef(run string, spec Spec) string
}

// Deleter is a Platform that can delete instances. Deleting an instance that
// is already gone succeeds.
type Deleter interface {
	Delete(ctx context.Context, inst Instance) error
}

// DeleteBounder is a Deleter that bounds its own Delete and Stop: they
// end within DeleteBound (their calls, tries and waits together). A
// caller gives them a context of their own with this much time, never
// what is left of a context that something else used up.
type DeleteBounder interface {
	DeleteBound() time.Duration
}

// DefaultDeleteBound is the time a caller gives the Delete (or Stop) of a
// platform that is no DeleteBounder.
const DefaultDeleteBound = 15 * time.Minute

// Stopper is a Platform that can stop an instance while keeping its disk.
type Stopper interface {
	Stop(ctx context.Context, inst Instance) error
}

// Lister is a Platform that can list the instances it knows about.
type Lister interface {
	List(ctx context.Context) ([]Instance, error)
}

// Finder is a Platform that can tell, without reaching an instance,
// whether it is there to run commands on: Find returns nil when it may be,
// an error wrapping ErrNotFound when it is gone or being deleted, and one
// wrapping ErrStopped when it is stopped (or stopping). Any other error
// means it cannot tell.
type Finder interface {
	Find(ctx context.Context, inst Instance) error
}

// Streamer is a Platform that can hand a script's stdout to a writer as it
// comes, whole, instead of keeping its last bytes in Result.Stdout (which
// is then empty): fetch streams an archive of results through it. Stderr,
// the exit code and cancellation are as for Exec.
type Streamer interface {
	ExecStream(ctx context.Context, inst Instance, script string, stdin io.Reader, stdout io.Writer) (Result, error)
}

// ErrNoStream is ExecStream's error (wrapped) where a platform can run
// scripts but not stream them on this instance (brev's exec transport):
// the caller falls back to Exec.
var ErrNoStream = errors.New("this transport cannot stream a command's output")

// StreamChecker is a Streamer whose settings may rule streaming out:
// CanStream is false when every ExecStream would fail with ErrNoStream
// (brev's exec transport), so a caller need not try.
type StreamChecker interface {
	CanStream() bool
}

// Closer is a Platform that holds resources (connections, control masters)
// to release when the run ends.
type Closer interface {
	Close() error
}

// ErrNotFound reports a call on an instance that does not exist (any more).
var ErrNotFound = errors.New("instance not found")

// ErrStopped reports an instance that is stopped: nothing runs on it.
var ErrStopped = errors.New("instance stopped")

// ExecError is a transport failure: the command could not be started or its
// instance could not be reached, so there is no exit code. It never carries
// the script or its input, which may hold secret names or values.
type ExecError struct {
	// Instance is the plan's instance name.
	Instance string
	// Err is the underlying failure.
	Err error
	// Transient is true when trying again may succeed (ssh's 255, a
	// connection reset, a fork that hit a resource limit).
	Transient bool
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("exec on %s: %v", e.Instance, e.Err)
}

func (e *ExecError) Unwrap() error { return e.Err }
