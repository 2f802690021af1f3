package steps

import (
	"context"
	"strings"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// runtime runs the jobs of `run` steps on an instance. The process runtime
// supervises host processes; the docker runtime (docker run -d, inspect,
// logs, stop, rm -f) implements the same verbs.
type runtime interface {
	// submit launches spec's job, unless a job of that id already exists on
	// inst, which it adopts instead: a retry or resume never launches twice.
	submit(ctx context.Context, inst platform.Instance, spec jobSpec) (launch, error)
	// status observes jobs on inst in one round trip: for each probe, the
	// job's state, its log bytes since probe.Offset, and the last line of
	// status.json in its results directory.
	status(ctx context.Context, inst platform.Instance, probes []probe) ([]observation, error)
	// cancel stops the jobs ids on inst and marks them canceled by taoflow.
	// It returns a line for each job it stopped.
	cancel(ctx context.Context, inst platform.Instance, ids []string) ([]string, error)
	// cleanup stops every job of this run on inst, as cancel does.
	cleanup(ctx context.Context, inst platform.Instance) ([]string, error)
}

// remover is a runtime whose canceled jobs stay readable until they are
// removed: a wait reads their last log lines after cancel, then calls
// remove. The docker runtime is one (docker stop, then docker rm -f).
type remover interface {
	// remove deletes the jobs ids on inst; a job that is gone already is
	// not an error. It returns a line for what it removed.
	remove(ctx context.Context, inst platform.Instance, ids []string) ([]string, error)
}

// jobSpec is a job to submit.
type jobSpec struct {
	ID       string
	Instance string // the plan's instance name (a label of its container)
	Command  string
	// Workdir is the working directory: on the instance for a process
	// ("" is $HOME; may start with ~/), in the container for an image.
	Workdir string
	Env     []string // secret names the job gets in its environment

	// The fields below are for containers only.
	Image   string
	GPUs    string   // docker run --gpus: all, a count, device=0,1 ("" or 0: none)
	Volumes []string // HOST:CONTAINER[:OPTS]; a leading ~ on HOST is the instance's $HOME
	IPC     string
	ShmSize string
	Memory  string
	User    string
}

// launch is what submit did.
type launch struct {
	Adopted bool   // the job existed already
	Ref     string // the runtime's handle, such as pid:1234
}

// runSubmit runs a runtime's submit script with the job's secrets on stdin.
// A transport failure is a launch failure (what names the job in the
// message); the caller reads the exit code and the output.
func (s *Steps) runSubmit(ctx context.Context, inst platform.Instance, spec jobSpec, script, what string) (platform.Result, error) {
	prelude, stdin, err := s.secretEnv(spec.Env)
	if err != nil {
		return platform.Result{}, err
	}
	res, err := s.exec(ctx, inst, prelude+script, stdin)
	if err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		return res, s.fail(ClassLaunchFailed, err, "%s %s on %s: %v", what, spec.ID, inst.Name, err)
	}
	return res, nil
}

// launched reads the submit script's last line, "launched REF" or
// "adopted REF"; ok is false when it is neither.
func launched(stdout []byte) (adopted bool, ref string, ok bool) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) == 0 || (f[0] != "launched" && f[0] != "adopted") {
		return false, "", false
	}
	if len(f) > 1 {
		ref = f[1]
	}
	return f[0] == "adopted", ref, true
}

// probe asks status about one job.
type probe struct {
	ID      string
	Offset  int64  // log bytes already seen
	Results string // results directory on the instance ("" for none)
}

// jobState is a job's state as a runtime sees it.
type jobState int

const (
	stateRunning  jobState = iota
	stateExited            // ended with an exit code
	stateMissing           // no such job
	stateVanished          // launched, but gone without an exit code
)

func (st jobState) String() string {
	switch st {
	case stateRunning:
		return "running"
	case stateExited:
		return "exited"
	case stateMissing:
		return "missing"
	case stateVanished:
		return "vanished"
	}
	return "unknown"
}

// observation is what status saw of one job.
type observation struct {
	State    jobState
	Code     int  // exit code when exited; -1 when unreadable
	Canceled bool // taoflow canceled it
	// Age is how long the job has run (whole seconds; 0 when unknown).
	Age time.Duration
	// Log holds the log bytes after the probe's offset (at most a chunk);
	// More is true when the log has bytes beyond them.
	Log  []byte
	More bool
	// Status is the last line of the job's status.json, or "";
	// StatusLines the lines of its end (8 KiB, the first maybe cut), the
	// last of them Status: the wait takes those after the last it saw.
	Status      string
	StatusLines []string
	// Reason, when set, says why an ended job failed whatever its exit
	// code ("oom", "start_failed: ...") or why it vanished.
	Reason string
	// Note is a remark on a job that still runs (a paused or restarting
	// container); the wait logs it when it changes.
	Note string
}
