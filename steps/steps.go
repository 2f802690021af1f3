package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/secret"
)

// Error classes: what kind of failure a step had, for the user and for
// retry decisions.
const (
	ClassNotReachable  = "not reachable"
	ClassNoDocker      = "no docker"
	ClassTooFewGPUs    = "too few GPUs"
	ClassLaunchFailed  = "launch failed"
	ClassAuthFailed    = "auth failed"
	ClassNoEntitlement = "no entitlement"
	// ClassRegistryUnreachable: the registry could not be reached (DNS,
	// connect, TLS), so neither the key nor the entitlement was checked.
	ClassRegistryUnreachable = "registry unreachable"
	ClassPullFailed          = "pull failed"
	ClassJobFailed           = "job failed"
	ClassCanceled            = "canceled"
	ClassTimedOut            = "timed out"
	ClassVanished            = "job vanished"
	ClassUploadFailed        = "upload failed"
	ClassSendFailed          = "send failed"
	ClassFetchFailed         = "fetch failed"
	ClassDownloadFailed      = "download failed"
	ClassMismatch            = "verification mismatch"
	ClassDeleteFailed        = "delete failed"
	ClassUnsupported         = "unsupported"
	ClassInvalidConfig       = "invalid settings"
)

// DefaultPollInterval is how often wait polls its jobs when neither
// with.interval nor Config.PollInterval says otherwise.
const DefaultPollInterval = 10 * time.Second

// Config is what every step of one run shares.
type Config struct {
	Platform platform.Platform
	Plan     *plan.Plan
	// Secrets holds the resolved secret values by name; nil is none.
	Secrets *secret.Set
	RunID   string
	// BaseDir is taoflow's working directory: the relative paths of a
	// send or fetch resolve against it when there is no plan file (with
	// one, against the plan's directory).
	BaseDir string
	// StateDir is taoflow's state directory, which no fetch may replace
	// (plan.CheckFetchTo) and a send never copies; empty is not checked.
	StateDir string
	// PollInterval is wait's default when with.interval is absent
	// (DefaultPollInterval when zero).
	PollInterval time.Duration
	// Owner says which process drives the run, "HOST:PID", for the
	// taoflow.owner label of its containers: `taoflow reap` leaves the
	// containers of a process still alive on its host. Default: this
	// process.
	Owner string
	// Record is what the run records about itself (its name, tags and
	// provenance), copied into every taoflow-run.json.
	Record RunRecord
	// TransientBackoff is the pause before a script whose transport failed
	// before it ran is tried again, doubled before each later try (see
	// transientTries); DefaultTransientBackoff when zero.
	TransientBackoff time.Duration
	// StopTimeout bounds the stop of the run's jobs on an instance that is
	// deleted (or stopped) next, which ends them anyway: a hung instance
	// must not hold up its own delete. DefaultStopTimeout when zero.
	StopTimeout time.Duration
	// OnAutostop, when set, is told what an instance's autostop watchdog
	// decided when taoflow reads it back (a lease renewal, a cleanup):
	// the instance stopped itself while taoflow was away.
	OnAutostop func(instance string, d AutostopDecision)
}

// DefaultStopTimeout is Config.StopTimeout when zero: time enough to stop
// jobs (a TERM, 5 s, a KILL; docker stop) on an instance that answers.
const DefaultStopTimeout = 2 * time.Minute

// Steps runs the step kinds of one run.
type Steps struct {
	cfg     Config
	redact  *secret.Redactor
	process runtime
	docker  runtime

	mu sync.Mutex
	// digests holds the image digests pull saw, by instance name and
	// image, for the manifests of uploads from that instance.
	digests map[string]map[string]string
	// gpus holds the GPU count preflight saw, by instance name, for
	// gpus: per-slot.
	gpus map[string]int

	// watchers follow the jobs of each instance, by instance name
	// (watch.go); watchClosed is set once Close has stopped them.
	watchMu     sync.Mutex
	watchers    map[string]*watcher
	watchClosed bool
	// renew holds the autostop lease renewers (autostop.go).
	renew renewers

	// wakeClock is the clock of the followers' wake rations (time.Now
	// when nil); tests stop it.
	wakeClock func() time.Time
}

// New returns the steps of the run cfg describes.
func New(cfg Config) *Steps {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.TransientBackoff <= 0 {
		cfg.TransientBackoff = DefaultTransientBackoff
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	s := &Steps{cfg: cfg, redact: cfg.Secrets.Redactor(), digests: map[string]map[string]string{}}
	s.process = &process{s: s, termGrace: defaultTermGrace}
	s.docker = &docker{s: s, stopGrace: defaultTermGrace}
	return s
}

// KV is one matrix key of a cell with its value.
type KV struct {
	Key, Value string
}

// Cell is the matrix cell a node runs for.
type Cell struct {
	ID     string
	Index  int
	Values []KV
}

// Job is a job a wait step waits for.
type Job struct {
	ID string
	// Results is the run's with.results: a directory on the instance
	// (it may start with ~/) whose status.json shows TAO progress.
	Results string
	// Image is the run's image; "" is a host process.
	Image string
	// Instance is where the job runs; a zero Instance (no Name) is the
	// wait node's own instance.
	Instance platform.Instance
}

// Request is one attempt of one node.
type Request struct {
	NodeID   string
	Step     *plan.Step
	Cell     *Cell // nil for per-instance nodes
	Instance platform.Instance
	// With holds the with: values, expressions already substituted; nil
	// when absent.
	With *plan.Value
	// JobID names the job of a run node (tf-<run>-<step>-<cell|instance>).
	JobID string
	// Jobs are, for a wait node, the jobs of the run nodes it needs.
	Jobs    []Job
	Attempt int
	// Log is the node's log; each line becomes a log event upstream.
	Log io.Writer
	// Progress reports a node's progress: a short line such as
	// "epoch 3/10 loss 0.21 eta 0:04:00" and its figures.
	Progress func(progress.Report)
	// Release releases the instance; a delete step ends with it.
	Release func(ctx context.Context, force bool) error
	// NoJobs says no job of the run can be running on the instance (none
	// was launched, or the instance is gone or stopped): a delete step
	// then has none to stop, and does not try to reach the instance.
	NoJobs bool
	// Record, when set, is given facts the step learned that belong in
	// the run state: pull records RecordImage and RecordDigest, wait
	// RecordLogOffsets.
	Record func(key, value string)
	// Slot is the slot of the instance the node's cell holds; nil for a
	// node of no cell. A run step with gpus: per-slot runs its job on
	// Slot.GPUs.
	Slot *Slot
	// Partial, for an upload or fetch that salvages results
	// (docs/design.md §8.6), says why what it copies may be partial; the
	// manifest says so (partial, partial_why). "" is whole.
	Partial string
	// Facts are what this node recorded in earlier attempts of the run
	// (a run resumed after a crash): a wait goes on reading its jobs' logs
	// where the node log ends instead of from the start.
	Facts map[string]string
}

// Keys of Request.Record.
const (
	RecordImage  = "image"  // the image a pull step pulled, as the plan names it
	RecordDigest = "digest" // its digest, repo@sha256:... (or the image id, sha256:..., for an image no registry knows)
	// RecordLogOffsets is, for a wait, a JSON object of job id → the bytes
	// of that job's log already written to the node log.
	RecordLogOffsets = "log_offsets"
	// RecordStatusSeen is, for a wait, a JSON object of job id → the
	// sha256 (hex) of the last status.json line it took points from: a
	// resumed wait takes only the lines after it (docs/design.md §7.7).
	RecordStatusSeen = "status_seen"
	// RecordGoneAt is, for a wait, a JSON object of instance name → when
	// the platform first said that instance was gone or stopped (RFC
	// 3339): its billing figure ends there (pricing.Costs).
	RecordGoneAt = "gone_at"
)

// Error is a step failure with a class the user can act on.
type Error struct {
	Class string
	// Code is the job's exit code where there is one (0 otherwise).
	Code int
	Msg  string
	// Err is the underlying failure, if any (a transport error).
	Err error
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Class
	}
	return e.Class + ": " + e.Msg
}

// ExitCode returns the job's exit code, so the engine records it.
func (e *Error) ExitCode() int { return e.Code }

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of the *Error in err's chain, or "".
func ClassOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}

// fail builds an *Error whose message has every secret value redacted.
func (s *Steps) fail(class string, err error, format string, args ...any) *Error {
	return &Error{Class: class, Msg: s.redact.Redact(fmt.Sprintf(format, args...)), Err: err}
}

// Do runs one attempt of req's node, dispatching on req.Step.Uses.
func (s *Steps) Do(ctx context.Context, req Request) error {
	if req.Step == nil {
		return &Error{Class: ClassInvalidConfig, Msg: "request without a step"}
	}
	req.Log = &redactWriter{w: logOrDiscard(req.Log), r: s.redact}
	if req.Progress == nil {
		req.Progress = func(progress.Report) {}
	}
	switch req.Step.Uses {
	case plan.KindPreflight:
		return s.preflight(ctx, req)
	case plan.KindRun:
		return s.run(ctx, req)
	case plan.KindWait:
		return s.wait(ctx, req)
	case plan.KindUploadS3:
		return s.upload(ctx, req)
	case plan.KindSend:
		return s.send(ctx, req)
	case plan.KindFetch:
		return s.fetch(ctx, req)
	case plan.KindDownloadS3:
		return s.download(ctx, req)
	case plan.KindDelete:
		return s.delete(ctx, req)
	case plan.KindNGCAuth:
		return s.ngcAuth(ctx, req)
	case plan.KindPull:
		return s.pull(ctx, req)
	}
	return &Error{Class: ClassUnsupported, Msg: fmt.Sprintf("unknown step kind %q", req.Step.Uses)}
}

// runtimeFor picks the runtime of a job by its image.
func (s *Steps) runtimeFor(image string) runtime {
	if image == "" {
		return s.process
	}
	return s.docker
}

// transientTries is how many times exec tries a script whose transport
// failed before it ran (ssh's 255, brev's "could not connect"), waiting
// Config.TransientBackoff, then twice that, and so on, in between. Such a
// script did not run, so trying again cannot run it twice.
const transientTries = 4

// DefaultTransientBackoff is Config.TransientBackoff's default: with four
// tries, a host that stays unreachable is given up after 7s of pauses.
const DefaultTransientBackoff = time.Second

// privatePrelude starts every script but the readiness probe
// (scripts/private.sh): what a script creates on the instance is the
// user's alone.
var privatePrelude = script(nil, "private")

// exec runs script on inst with the given stdin (nil is none), after
// privatePrelude. A transient transport failure is tried again (see
// transientTries); a cancelled ctx is returned as its cause.
func (s *Steps) exec(ctx context.Context, inst platform.Instance, script string, stdin []byte) (platform.Result, error) {
	if script != probeScript {
		// The probe stays the two words it is (docs/design.md §5): it creates
		// nothing.
		script = privatePrelude + script
	}
	var res platform.Result
	tries, err := s.retryTransient(ctx, func() error {
		var in io.Reader
		if stdin != nil {
			in = strings.NewReader(string(stdin))
		}
		var err error
		res, err = s.cfg.Platform.Exec(ctx, inst, script, in)
		res.Stdout, res.Stderr = dropCutLine(res.Stdout), dropCutLine(res.Stderr)
		return err
	})
	if err != nil && tries > 1 && ctx.Err() == nil {
		err = fmt.Errorf("%w (tried %d times)", err, tries)
	}
	return res, err
}

// retryTransient is the one rule for running a remote script again: it
// calls attempt until it succeeds or fails with anything but a transient
// transport failure (a *platform.ExecError with Transient set: the script
// did not run), at most transientTries times, pausing
// Config.TransientBackoff, then twice that, and so on, in between. It
// returns how many tries it made and the last attempt's error; once ctx is
// cancelled, ctx's cause.
func (s *Steps) retryTransient(ctx context.Context, attempt func() error) (int, error) {
	wait := s.cfg.TransientBackoff
	for try := 1; ; try++ {
		err := attempt()
		if err != nil && ctx.Err() != nil {
			return try, context.Cause(ctx)
		}
		var ee *platform.ExecError
		if err == nil || !errors.As(err, &ee) || !ee.Transient || try == transientTries {
			return try, err
		}
		if !sleep(ctx, wait) {
			return try, context.Cause(ctx)
		}
		wait *= 2
	}
}

// truncatedMarker starts output a platform cut to its capture limit
// (platform.Tail): the marker line, then the last bytes.
var truncatedMarker = []byte("[taoflow: output truncated")

// dropCutLine removes, from output a platform cut short, the line the cut
// fell in after the marker: it may begin inside a secret, and the rest of
// a secret no longer matches the redactor.
func dropCutLine(b []byte) []byte {
	if !bytes.HasPrefix(b, truncatedMarker) {
		return b
	}
	m := bytes.IndexByte(b, '\n') + 1
	if m == 0 {
		return b
	}
	cut := bytes.IndexByte(b[m:], '\n') + 1
	if cut == 0 {
		return b[:m]
	}
	return append(b[:m:m], b[m+cut:]...)
}

// redactWriter redacts each write on its own. Steps write the node log in
// whole lines and secrets are single-line, so no secret spans two writes;
// unlike secret.NewWriter it holds nothing back, so a job's latest log line
// shows at once.
type redactWriter struct {
	w io.Writer
	r *secret.Redactor
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.r.RedactBytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func logOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// outputLines returns the non-empty lines of a command's output.
func outputLines(b []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// lastLine returns the last non-empty line of b, trimmed, redacted and then
// clipped to at most 300 bytes: the part of a tool's stderr that says what
// went wrong.
func (s *Steps) lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return s.redact.Clip(strings.TrimSpace(lines[len(lines)-1]), 300)
}

// sleep waits d or until ctx is done, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
