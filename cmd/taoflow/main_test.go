package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/state"
)

// TestMain lets the test binary act as the taoflow command inside scripts.
func TestMain(m *testing.M) {
	if os.Getenv("XDG_STATE_HOME") == "" {
		// The Go tests' applies add their states to an index of their
		// own, not to that of the user running the tests (the brev tests
		// set HOME instead: brevEnv).
		if dir, err := os.MkdirTemp("", "taoflow-xdg-state-"); err == nil {
			os.Setenv("XDG_STATE_HOME", dir)
		}
	}
	testscript.Main(m, map[string]func(){
		"taoflow": func() {
			code := exitCode(run(context.Background(), os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}), os.Stderr)
			writeHWM()
			os.Exit(code)
		},
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Scripts refer to the repository's example plans.
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", wd+"/../../examples/plans")
			env.Setenv("SCHEMA", wd+"/../../schema/taoflow.schema.json")
			isolateState(env)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"procs":    cmdProcs,
			"noargv":   cmdNoArgv,
			"sleep":    cmdSleep,
			"waitnode": cmdWaitNode,
			"waitlog":  cmdWaitLog,
			"waitgrep": cmdWaitGrep,
			"exitcode": cmdExitCode,
			"sigrun":   cmdSigRun,
			"waitrun":  cmdWaitRun,
		},
	})
}

// exitcode N PROGRAM [ARGS...]: run PROGRAM as exec does (its stdout and
// stderr are then checked by stdout/stderr) and want exit status N. It pins
// the code of the exit-code table where `! exec` takes any failure.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// isolateState gives a script an index of states (and a brev ledger) of
// its own, beside its working directory (not in it: records scripts send
// their working directory), not the user's running the tests.
func isolateState(env *testscript.Env) {
	env.Setenv("XDG_STATE_HOME", filepath.Join(filepath.Dir(env.WorkDir), filepath.Base(env.WorkDir)+"-xdg-state"))
}

// waitfile PATH [SECONDS]: wait until PATH exists (default 30s).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || neg {
		ts.Fatalf("usage: waitfile path [seconds]")
	}
	limit := 30 * time.Second
	if len(args) > 1 {
		n, _ := strconv.Atoi(args[1])
		limit = time.Duration(n) * time.Second
	}
	testrig.Eventually(ts, limit, args[0]+" to appear", func() bool {
		_, err := os.Stat(ts.MkAbs(args[0]))
		return err == nil
	})
}

// waitgrep FILE REGEXP: wait (up to 60s) until FILE holds a match of
// REGEXP: what a background command has printed so far, when it writes
// to a file (sh -c 'exec taoflow ... 2>FILE').
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitgrep file regexp")
	}
	re, err := regexp.Compile(args[1])
	if err != nil {
		ts.Fatalf("waitgrep: %v", err)
	}
	testrig.Eventually(ts, 60*time.Second, fmt.Sprintf("%s to show %q", args[0], args[1]), func() bool {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		return re.Match(b)
	})
}

// waitfact NODE KEY: wait (up to 60s) until node NODE of the latest run
// records its fact KEY anew (it differs from what the state held when
// waitfact began, or appears): what the node wrote before that record is
// then in the state too, and a kill right after lands between two
// records.
func cmdWaitFact(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitfact node key")
	}
	fact := func() string {
		st, err := state.OpenReadOnly(ts.MkAbs(".taoflow"))
		if err != nil {
			return ""
		}
		defer st.Close()
		ctx := context.Background()
		r, err := st.LatestRun(ctx)
		if err != nil {
			return ""
		}
		n, err := st.Node(ctx, r.ID, args[0])
		if err != nil {
			return ""
		}
		return n.Facts[args[1]]
	}
	before := fact()
	testrig.Eventually(ts, 60*time.Second, fmt.Sprintf("node %s to record its %s anew", args[0], args[1]), func() bool {
		now := fact()
		return now != "" && now != before
	})
}

// waitnode [-re] NODE STATE: wait (up to 3m) until the state in .taoflow
// says node NODE of the latest run is in STATE; with -re, NODE is a regular
// expression (anchored) and any node it matches will do.
func cmdWaitNode(ts *testscript.TestScript, neg bool, args []string) {
	match := func(id string) bool { return id == args[0] }
	if len(args) == 3 && args[0] == "-re" {
		re, err := regexp.Compile("^(?:" + args[1] + ")$")
		if err != nil {
			ts.Fatalf("waitnode: %v", err)
		}
		match, args = re.MatchString, args[1:]
	}
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitnode [-re] node state")
	}
	var last []string
	// A bound for a condition, not a duration that orders anything: on a
	// loaded machine launching a container over ssh alone took 15 s.
	const limit = 3 * time.Minute
	if !testrig.Within(limit, func() bool {
		st, err := state.OpenReadOnly(ts.MkAbs(".taoflow"))
		if err != nil {
			return false // not made yet
		}
		defer st.Close()
		ctx := context.Background()
		last = last[:0]
		if r, err := st.LatestRun(ctx); err == nil {
			if nodes, err := st.Nodes(ctx, r.ID); err == nil {
				for _, n := range nodes {
					if match(n.ID) {
						last = append(last, n.ID+"="+n.State)
						if n.State == args[1] {
							return true
						}
					}
				}
			}
		}
		return false
	}) {
		ts.Fatalf("no node %s became %s within %s (last: %q)", args[0], args[1], limit, last)
	}
}

// waitlog [-count N] NODE TEXT: wait (up to 60s) until the log of node
// NODE of the latest run in .taoflow holds TEXT (N times or more).
func cmdWaitLog(ts *testscript.TestScript, neg bool, args []string) {
	n := 1
	if len(args) == 4 && args[0] == "-count" {
		var err error
		if n, err = strconv.Atoi(args[1]); err != nil || n < 1 {
			ts.Fatalf("waitlog: -count %q is not a positive number", args[1])
		}
		args = args[2:]
	}
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitlog [-count N] node text")
	}
	testrig.Eventually(ts, 60*time.Second, fmt.Sprintf("the log of node %s to show %q %d times", args[0], args[1], n), func() bool {
		return strings.Count(nodeLog(ts.MkAbs(".taoflow"), args[0]), args[1]) >= n
	})
}

// nodeLog returns the log of node of the latest run in the state at dir,
// or "" while there is none.
func nodeLog(dir, node string) string {
	st, err := state.OpenReadOnly(dir)
	if err != nil {
		return ""
	}
	defer st.Close()
	r, err := st.LatestRun(context.Background())
	if err != nil {
		return ""
	}
	rc, err := st.OpenLog(r.ID, node)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// sleep DURATION: pause. Never to order anything (a script waits for what
// it needs with waitfile, waitgrep, waitnode, waitlog or waitfact); no
// script uses it now.
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: sleep duration")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("sleep: %v", err)
	}
	time.Sleep(d)
}

// procs TEXT: some process's command line contains TEXT; with !, none does
// (polled for up to 10s, so processes being torn down get time to go).
func cmdProcs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: [!] procs text")
	}
	var found []string
	if testrig.Within(10*time.Second, func() bool {
		found = processesWith(args[0])
		return len(found) > 0 != neg
	}) {
		return
	}
	if neg {
		ts.Fatalf("processes still running with %q in their command line: %s", args[0], strings.Join(found, "; "))
	}
	ts.Fatalf("no process has %q in its command line", args[0])
}

// noargv TEXT SECONDS: sample every process's argv for SECONDS; fail if any
// contains TEXT (a secret must never be on a command line).
func cmdNoArgv(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: noargv text seconds")
	}
	n, _ := strconv.Atoi(args[1])
	deadline := time.Now().Add(time.Duration(n) * time.Second)
	samples := 0
	for time.Now().Before(deadline) {
		if found := processesWith(args[0]); len(found) > 0 {
			ts.Fatalf("a secret is on a command line: %s", strings.Join(found, "; "))
		}
		samples++
		time.Sleep(5 * time.Millisecond)
	}
	ts.Logf("sampled /proc/*/cmdline %d times", samples)
}

func processesWith(text string) []string {
	var out []string
	for _, p := range testrig.ProcessesWith(text) {
		out = append(out, fmt.Sprintf("%d: %s", p.PID, p.Cmdline()))
	}
	return out
}

// sigrun SIGNAL: send SIGNAL (HUP, TERM, INT) to the apply process of the
// latest run in .taoflow, as a closed terminal or a service manager would;
// testscript's kill knows only INT and KILL.
func cmdSigRun(ts *testscript.TestScript, neg bool, args []string) {
	sigs := map[string]syscall.Signal{"HUP": syscall.SIGHUP, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT}
	sig, ok := sigs[strings.TrimPrefix(firstArg(args), "SIG")]
	if neg || len(args) != 1 || !ok {
		ts.Fatalf("usage: sigrun HUP|TERM|INT")
	}
	st, err := state.OpenReadOnly(ts.MkAbs(".taoflow"))
	ts.Check(err)
	defer st.Close()
	r, err := st.LatestRun(context.Background())
	ts.Check(err)
	ts.Check(syscall.Kill(r.PID, sig))
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
