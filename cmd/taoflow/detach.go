package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// detachedRecordWait is how long apply --detach waits for its background
// process to record the run before it gives up saying so.
const detachedRecordWait = 15 * time.Second

// detachedFlag is the hidden flag that makes apply the background process
// of an apply --detach: it runs the run it names, with no terminal.
const detachedFlag = "detached-run"

// detachedStart is what apply --detach --json prints (docs/json.md).
type detachedStart struct {
	Run string `json:"run"`
	PID int    `json:"pid"`
	Log string `json:"log"`
}

// startDetached is apply --detach once the plan is checked and the user
// agreed: it starts this program again as `apply ... --detached-run RUN`
// in a session of its own (no terminal: SIGHUP never reaches it; stdin
// /dev/null; stdout and stderr appended to the run's apply.log), waits
// until that process has recorded the run, and says how to follow it.
// The background process gets the secrets as this one did, from the
// environment it inherits; its argv holds none (secrets are never flags).
func startDetached(sio stdio, g *globals, path string, f *applyFlags, p *plan.Plan, prior *runner.Resumed, runID string) error {
	dir, err := filepath.Abs(g.stateDir)
	if err != nil {
		return err
	}
	// The state exists, private, before the log goes in it.
	st, err := state.Open(dir)
	if err != nil {
		return err
	}
	_ = st.Close()
	logf, err := state.OpenApplyLog(dir, runID)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("apply --detach: finding this program to start it again: %w", err)
	}
	cmd := exec.Command(exe, detachedArgs(f.vars.cmd.Flags(), f.brev != "", path, dir, p, prior, runID)...)
	// argv[0] as this process got it: a program that tells what to run
	// by its name (a test binary standing for taoflow) runs the same.
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Fprintf(logf, "taoflow: %s: apply --detach of %s as run %s\n", time.Now().Format(time.RFC3339), escapeControls(path), runID)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("apply --detach: starting the background apply: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	logPath := state.ApplyLogPath(dir, runID)
	recorded, err := waitRecorded(dir, runID, pid, prior != nil, exited)
	if err != nil {
		// It ended before it recorded the run: nothing runs; what it
		// said is in its log.
		code := exitFailed
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
		fmt.Fprintf(escapeWriter{sio.err}, "taoflow: the background apply (pid %d) ended (exit %d) before it started run %s; it said:\n", pid, code, runID)
		printTail(sio.err, logPath, 64<<10)
		return silent(code)
	}
	if !recorded {
		return fmt.Errorf("the background apply (pid %d) has not recorded run %s after %s; its output: %s; once it has, 'taoflow status %s' shows it (to stop it before: kill %d)", pid, runID, detachedRecordWait, logPath, runID, pid)
	}
	if f.output == "json" {
		return writeJSON(sio.out, detachedStart{Run: runID, PID: pid, Log: logPath})
	}
	withState := ""
	if fl := f.vars.cmd.Flag("state"); fl != nil && fl.Changed {
		withState = " --state " + shellquote.Quote(g.stateDir)
	}
	w := escapeWriter{sio.out}
	fmt.Fprintf(w, "taoflow: run %s is running in the background (pid %d); closing this terminal does not stop it\n", runID, pid)
	fmt.Fprintf(w, "  watch it:      taoflow attach %s%s\n", runID, withState)
	fmt.Fprintf(w, "  its job logs:  taoflow logs -f %s%s\n", runID, withState)
	fmt.Fprintf(w, "  its state:     taoflow status %s%s\n", runID, withState)
	fmt.Fprintf(w, "  stop it:       taoflow cancel %s%s\n", runID, withState)
	fmt.Fprintf(w, "  apply's output: %s\n", logPath)
	return nil
}

// detachedArgs is the command line of the background process of apply
// --detach: the flags the user gave, less those the foreground settled
// (--detach, --yes, --output, --state, --resume, --brev-binary), which
// it passes as settled: the run's id, the state directory (absolute),
// the resumed run, the brev program agreed to (brevGiven: --brev-binary,
// which confirmProgram made p's platform.binary), --yes (the user agreed,
// or gave it) and plain output for the log. flags are apply's, parsed.
func detachedArgs(flags *pflag.FlagSet, brevGiven bool, path, stateDir string, p *plan.Plan, prior *runner.Resumed, runID string) []string {
	args := []string{"apply"}
	settled := map[string]bool{"detach": true, "yes": true, "output": true, "json": true, "state": true,
		"resume": true, "brev-binary": true, detachedFlag: true, "detach-on-hangup": true}
	flags.Visit(func(fl *pflag.Flag) {
		if settled[fl.Name] {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fl.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	args = append(args, "--yes", "--output=plain", "--state="+stateDir, "--"+detachedFlag+"="+runID)
	if prior != nil {
		args = append(args, "--resume="+prior.Run.ID)
	}
	if brevGiven {
		args = append(args, "--brev-binary="+p.Platform.Binary)
	} else if prog := runner.PlanBinary(p); prog != "" {
		// The user agreed to the plan's program (confirmProgram).
		args = append(args, "--brev-binary="+prog)
	}
	return append(args, "--", path)
}

// waitRecorded waits until the process pid has recorded run runID in the
// state in dir (a resumed run: claimed it), for at most
// detachedRecordWait. An error is the process's end, before that.
func waitRecorded(dir, runID string, pid int, resumed bool, exited <-chan error) (bool, error) {
	deadline := time.After(detachedRecordWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if recordedBy(dir, runID, pid, resumed) {
				return true, nil // quick: it ran and ended
			}
			if err == nil {
				err = errors.New("exit 0")
			}
			return false, err
		case <-deadline:
			return false, nil
		case <-tick.C:
			if recordedBy(dir, runID, pid, resumed) {
				return true, nil
			}
		}
	}
}

func recordedBy(dir, runID string, pid int, resumed bool) bool {
	st, err := state.OpenReadOnly(dir)
	if err != nil {
		return false
	}
	defer st.Close()
	r, err := st.Run(context.Background(), runID)
	return err == nil && (!resumed || r.PID == pid)
}

// printTail copies the last max bytes of the file at path to w, control
// characters escaped.
func printTail(w io.Writer, path string, max int64) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(w, "  (its log %s: %v)\n", path, err)
		return
	}
	if int64(len(b)) > max {
		b = b[int64(len(b))-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(w, "  | %s\n", escapeControls(l))
	}
}

// hangupMode is what apply does when its terminal hangs up (SIGHUP).
type hangupMode int

const (
	// hangupTeardown: as Ctrl-C, cancel and tear down (the default).
	hangupTeardown hangupMode = iota
	// hangupIgnore: SIGHUP does nothing; no terminal owns this apply
	// (the background process of apply --detach), or it was started with
	// SIGHUP ignored (nohup), which apply keeps.
	hangupIgnore
	// hangupContinue: --detach-on-hangup; the run goes on, its output to
	// the run's apply.log from then on.
	hangupContinue
)

// hangup is apply's answer to SIGHUP (docs/design.md §8.7).
type hangup struct {
	mode     hangupMode
	stateDir string
	run      string
	once     sync.Once
}

// newHangup settles apply's SIGHUP mode before any signal is watched:
// signal.Notify would undo a SIGHUP ignored by nohup.
func newHangup(f *applyFlags, stateDir, run string) *hangup {
	h := &hangup{stateDir: stateDir, run: run}
	switch {
	case f.detachedRun != "" || signal.Ignored(syscall.SIGHUP):
		h.mode = hangupIgnore
		signal.Ignore(syscall.SIGHUP)
	case f.detachOnHangup || os.Getenv("TAOFLOW_DETACH_ON_HANGUP") == "1":
		h.mode = hangupContinue
	}
	if h.mode != hangupTeardown {
		// Writes to a closed pipe (a tee or ssh gone with the terminal)
		// fail with EPIPE, which the views ignore, instead of killing
		// the run with SIGPIPE.
		signal.Ignore(syscall.SIGPIPE)
	}
	return h
}

// signals are the signals apply's handler watches.
func (h *hangup) signals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if h.mode != hangupIgnore {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// continues reports whether the run goes on after sig (a SIGHUP under
// --detach-on-hangup), having moved apply's output to the run's
// apply.log: stdout and stderr now write there, not to the dead terminal.
// onHangup is called once, first (it stops the live view's redraws).
func (h *hangup) continues(sig os.Signal, onHangup func()) bool {
	if sig != syscall.SIGHUP || h.mode != hangupContinue {
		return false
	}
	h.once.Do(func() {
		if onHangup != nil {
			onHangup()
		}
		logf, err := state.OpenApplyLog(h.stateDir, h.run)
		if err != nil {
			// Nowhere to write: the run goes on regardless, its output
			// lost (the state and node logs still record it).
			return
		}
		defer logf.Close()
		fmt.Fprintf(logf, "taoflow: %s: SIGHUP (terminal closed): run %s goes on (--detach-on-hangup); apply's output from here on\n", time.Now().Format(time.RFC3339), h.run)
		_ = unix.Dup2(int(logf.Fd()), 1)
		_ = unix.Dup2(int(logf.Fd()), 2)
	})
	return true
}

// hangupView is the human view of an apply that goes on after a hangup:
// the live table until then, timestamped lines (to apply.log) after, so
// that a long run does not fill its log with redraws.
type hangupView struct {
	mu       sync.Mutex
	live     *liveView
	plain    *plainView
	switched bool
}

// withHangup gives v, the human live view of an apply in
// hangupContinue mode, a hangupView and returns the function that
// switches it; other views are left as they are.
func (h *hangup) withHangup(v applyView, out io.Writer) func() {
	hv, ok := v.(*humanView)
	if !ok || h.mode != hangupContinue {
		return nil
	}
	lv, ok := hv.Observer.(*liveView)
	if !ok {
		return nil
	}
	sw := &hangupView{live: lv, plain: &plainView{w: out}}
	hv.Observer = sw
	return sw.toPlain
}

func (v *hangupView) Event(e engine.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.switched {
		v.plain.Event(e)
		return
	}
	v.live.Event(e)
}

// toPlain stops the live table and prints events as lines from now on.
func (v *hangupView) toPlain() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.switched {
		v.switched = true
		v.live.Close()
	}
}

func (v *hangupView) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.switched {
		v.switched = true
		v.live.Close()
	}
}
