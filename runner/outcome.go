package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/state"
)

// TailLines is how many of a failed node's last log lines the end of a run
// shows.
const TailLines = 10

// FactFailedJob is the node fact a failed node gets when what failed is
// the job of a run node it observed (a wait): that run node's id. Users
// think "train failed", not "wait failed".
const FactFailedJob = "failed_job"

// factSlot is the node fact of the slot index its cell held, so a resumed
// run gives the cell the same slot (and GPUs).
const factSlot = "slot"

// FactCellValues is the node fact holding a cell's values as a JSON object
// (key → value), so that status can show them without the plan.
const FactCellValues = "cell_values"

// Failure is a node that failed or timed out, as the end of a run shows it.
type Failure struct {
	Node string `json:"node"` // the node that failed
	// Job is the run node whose job failed when Node (a wait) saw it fail;
	// "" when Node's own work failed.
	Job      string `json:"job,omitempty"`
	Step     string `json:"step"` // Job's step, else Node's
	Cell     string `json:"cell,omitempty"`
	Instance string `json:"instance,omitempty"`
	State    string `json:"state"`
	Message  string `json:"message"`
	// LogTail is the last lines (at most TailLines) of Node's log, which
	// holds the job's output for a wait, redacted as the state is.
	LogTail []string `json:"log_tail,omitempty"`
	// LogsCommand prints the whole log.
	LogsCommand string `json:"logs_command"`
}

// Title names the failure for a person: "train[n=2] failed (seen by
// wait[n=2] on a)", "pull@a failed".
func (f Failure) Title() string {
	on := ""
	if f.Instance != "" && !strings.HasSuffix(f.Node, "@"+f.Instance) {
		on = " on " + f.Instance
	}
	switch {
	case f.Job != "":
		return fmt.Sprintf("%s %s (seen by %s%s)", f.Job, f.State, f.Node, on)
	case on != "":
		return fmt.Sprintf("%s %s (%s)", f.Node, f.State, strings.TrimPrefix(on, " "))
	}
	return fmt.Sprintf("%s %s", f.Node, f.State)
}

// Outcome is how an apply ended (Apply.Run), for the views: the run
// state, apply's exit code (ExitCode of the state; cmd/taoflow exits with
// it), the verdict line, what failed and why, and what may remain.
type Outcome struct {
	RunID    string    `json:"run_id"`
	State    string    `json:"state"` // one of the state.Run* constants
	ExitCode int       `json:"exit_code"`
	Message  string    `json:"message"` // the verdict
	Failures []Failure `json:"failures,omitempty"`
	// Stopped are instances stopped instead of deleted (a results upload on
	// them failed); Left are those that may still exist; Kept those the
	// plan keeps (keep: true).
	Stopped []string `json:"stopped,omitempty"`
	Left    []string `json:"left,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	// Held are local sandboxes left as they are because a results upload
	// or fetch on them failed: they keep the results and cost nothing
	// (engine.ReleaseHeld); the run ends as failed, not exit 3.
	Held []string `json:"held,omitempty"`
	// Bills: the run's created instances bill by the hour (brev); the
	// views say "bills" only then.
	Bills bool `json:"-"`
	// RemoveCommand removes what Left, Stopped, Kept or Held name ("" when none).
	RemoveCommand string `json:"remove_command,omitempty"`
	// Teardown is why each of Left may still exist: an errors.Join of
	// *LeftError, in Left's order; nil when Left is empty. (The JSON view
	// has the reasons in its instance-left events.)
	Teardown error `json:"-"`
	// Cost is what the instances the run created on a billing platform
	// cost, at list prices; nil when it created none.
	Cost *pricing.RunCost `json:"cost,omitempty"`
	// StateErrors counts writes to the state that failed during the run;
	// the run goes on through them, so 'taoflow status' may miss what
	// they held.
	StateErrors int `json:"state_errors,omitempty"`
	// RecordErr is the state's error when the end of the run could not be
	// recorded; nil when it was.
	RecordErr error `json:"-"`
	// Results is the run's results table (empty when it launched no jobs,
	// or the state could not be read). The JSON view leaves it out:
	// 'taoflow results --json' prints it.
	Results ResultTable `json:"-"`
}

// Culprit returns the run node whose job node id (a wait that failed with
// message) saw fail, or "" when node's own work failed: the one run node
// it needs, else the one whose job id the message names.
func Culprit(g *engine.Graph, node, message string) string {
	n := g.Node(node)
	if n == nil || n.Step.Uses != "wait" {
		return ""
	}
	var runs []*engine.Node
	for _, d := range n.Needs {
		if d.Kind != engine.DepNode {
			continue
		}
		if up := g.Node(d.Node); up != nil && up.Step.Uses == "run" {
			runs = append(runs, up)
		}
	}
	if len(runs) == 1 {
		return runs[0].ID
	}
	if len(runs) == 0 {
		for _, m := range g.Nodes {
			if m.Step.Uses == "run" && slices.ContainsFunc(n.Needs, func(d engine.Dep) bool { return d.Step == m.Step.ID }) {
				runs = append(runs, m)
			}
		}
	}
	for _, r := range runs {
		if r.JobID != "" && strings.Contains(message, r.JobID) {
			return r.ID
		}
	}
	return ""
}

// LeftError is an instance of the run that teardown did not release as
// asked (its delete or stop failed, or was refused): it may still exist.
type LeftError struct {
	Instance string
	Err      error
}

func (e *LeftError) Error() string { return "instance " + e.Instance + ": " + e.Err.Error() }

func (e *LeftError) Unwrap() error { return e.Err }

// LogsCommand is the command that prints node's log of run.
func LogsCommand(run, node string) string {
	return "taoflow logs " + run + " " + shellquote.Quote(node)
}

// outcome builds the Outcome of a run that ended as sum says.
func (a *Apply) outcome(sum engine.Summary, runState string, exitCode int, verdict string) Outcome {
	o := Outcome{RunID: a.ID, State: runState, ExitCode: exitCode, Message: verdict,
		Stopped: sum.Stopped, Left: sum.Left, Kept: a.insts.keptNames(), Held: sum.Held, StateErrors: a.rec.errors(),
		Bills: a.cfg.Plan.Platform.Kind == plan.PlatformBrev}
	for _, n := range a.Graph.Nodes {
		st := sum.States[n.ID]
		if st != engine.Failed && st != engine.TimedOut {
			continue
		}
		msg := sum.Messages[n.ID]
		f := Failure{Node: n.ID, Step: n.Step.ID, Instance: sum.Placement[n.ID], State: string(st), Message: msg,
			LogsCommand: LogsCommand(a.ID, n.ID)}
		if f.Instance == "" {
			f.Instance = n.Instance
		}
		if n.Cell != nil {
			f.Cell = n.Cell.ID
		}
		if job := Culprit(a.Graph, n.ID, msg); job != "" {
			f.Job, f.Step = job, a.Graph.Node(job).Step.ID
		}
		f.LogTail = LogTail(a.store, a.ID, n.ID, TailLines)
		o.Failures = append(o.Failures, f)
	}
	var left []error
	for _, name := range sum.Left {
		left = append(left, &LeftError{Instance: name, Err: errors.New(sum.LeftWhy[name])})
	}
	o.Teardown = errors.Join(left...)
	if len(o.Left) > 0 || len(o.Stopped) > 0 || len(o.Kept) > 0 || len(o.Held) > 0 {
		o.RemoveCommand = "taoflow destroy " + a.ID + " --yes" + confirmFlags(PlatformData(a.cfg.Plan))
	}
	return o
}

// LogTail returns the last n lines of node's log of run ("" lines and all;
// nil when it has none).
func LogTail(store *state.Store, run, node string, n int) []string {
	rc, err := store.OpenLog(run, node)
	if err != nil {
		return nil
	}
	defer rc.Close()
	// Read only the end: a job's log can be large.
	const window = 64 << 10
	partial := false // the first line read is the end of one cut off
	if f, ok := rc.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Size() > window {
			if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
				return nil
			}
			partial = true
		}
	}
	var lines []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 64<<10), window+1)
	for sc.Scan() {
		if partial {
			partial = false
			continue
		}
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines // what was read, also after an error
}
