package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// TestRunWait launches a job that prints lines and writes TAO status.json
// lines, and waits for it: every log line arrives exactly once, in order,
// and progress ends on the last epoch.
func TestRunWait(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-train-a"
	cmd := `mkdir -p "$HOME/res"
for i in 1 2 3 4 5; do
	echo "job line $i"
	printf '{"date": "1/2/2026", "status": "RUNNING", "epoch": %d, "max_epoch": 5, "kpi": {"loss": 0.%d}, "eta": "0:00:0%d.25"}\n' $i $i $((6 - i)) >> "$HOME/res/status.json"
	sleep 0.05
done
printf 'no newline at the end'`
	e.runJob(t, e.steps, id, with("command", cmd))
	log, prog, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Results: "~/res"})
	if err != nil {
		t.Fatalf("wait: %v\nlog:\n%s", err, log)
	}
	var got []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(l, "job line") || strings.HasPrefix(l, "no newline") {
			got = append(got, l)
		}
	}
	want := []string{"job line 1", "job line 2", "job line 3", "job line 4", "job line 5", "no newline at the end"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job lines in the node log (-want +got):\n%s\nlog:\n%s", diff, log)
	}
	lines := prog.get()
	if len(lines) == 0 || lines[len(lines)-1] != "epoch 5/5 loss 0.5 eta 0:00:01" {
		t.Errorf("progress = %q, want it to end with epoch 5/5", lines)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "epoch ") {
			t.Errorf("progress line %q is not an epoch line", l)
		}
	}
	// Every status.json line is a point, once, however many lines one
	// poll found; the output lines hold no figures.
	wantPts := []string{id + " loss 1=0.1", id + " loss 2=0.2", id + " loss 3=0.3", id + " loss 4=0.4", id + " loss 5=0.5"}
	if diff := cmp.Diff(wantPts, prog.series()); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
}

// TestWaitOutputPoints: a job without status.json that prints plain
// "epoch N/M loss X acc Y" lines gives their points, every line once.
// A job that has status.json too gives its points from there only (a TAO
// job prints what it writes there).
func TestWaitOutputPoints(t *testing.T) {
	e := newEnv(t)
	const id, tao = "tf-r1-plain-a", "tf-r1-tao-a"
	e.runJob(t, e.steps, id, with("command", `for i in 1 2 3; do echo "Epoch $i/3: loss=0.$i acc 0.9$i eta 0:00:0$i"; echo "saving checkpoint"; done`))
	e.runJob(t, e.steps, tao, with("command", `mkdir -p "$HOME/res2"
for i in 1 2; do
	printf '{"epoch": %d, "kpi": {"loss": 0.%d, "acc": 0.5}}\n' $i $i >> "$HOME/res2/status.json"
	echo "epoch $i loss 0.$i acc 0.5"
	sleep 0.1
done`))
	_, prog, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id}, Job{ID: tao, Results: "~/res2"})
	if err != nil {
		t.Fatal(err)
	}
	var plain, fromStatus []string
	for _, p := range prog.series() {
		if strings.HasPrefix(p, id) {
			plain = append(plain, p)
		} else {
			fromStatus = append(fromStatus, p)
		}
	}
	want := []string{id + " loss 1=0.1", id + " acc 1=0.91", id + " loss 2=0.2", id + " acc 2=0.92", id + " loss 3=0.3", id + " acc 3=0.93"}
	if diff := cmp.Diff(want, plain); diff != "" {
		t.Errorf("points of output lines (-want +got):\n%s", diff)
	}
	want = []string{tao + " acc 1=0.5", tao + " loss 1=0.1", tao + " acc 2=0.5", tao + " loss 2=0.2"}
	if diff := cmp.Diff(want, fromStatus); diff != "" {
		t.Errorf("points of a job with status.json (-want +got):\n%s", diff)
	}
}

// TestWaitResumesStatusPoints: a wait records the last status.json line it
// took points from (as a hash); a resumed wait given that fact takes only
// the lines written after it, so the series holds no point twice.
func TestWaitResumesStatusPoints(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-st-a"
	e.runJob(t, e.steps, id, with("command", `mkdir -p "$HOME/res3"
for i in 1 2; do printf '{"epoch": %d, "kpi": {"loss": 0.%d}}\n' $i $i >> "$HOME/res3/status.json"; done`))
	wait := func(facts map[string]string) ([]string, map[string]string) {
		t.Helper()
		prog, recorded := &progressLog{}, map[string]string{}
		err := e.steps.Do(t.Context(), Request{
			NodeID: "wait@a", Step: &plan.Step{ID: "wait", Uses: plan.KindWait},
			Instance: e.inst, Jobs: []Job{{ID: id, Results: "~/res3"}}, Log: &logBuf{}, Progress: prog.add,
			Facts: facts, Record: func(k, v string) { recorded[k] = v },
		})
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return prog.series(), recorded
	}
	first, facts := wait(nil)
	if diff := cmp.Diff([]string{id + " loss 1=0.1", id + " loss 2=0.2"}, first); diff != "" {
		t.Errorf("first wait's points (-want +got):\n%s", diff)
	}
	if raw := facts[RecordStatusSeen]; !strings.Contains(raw, lineHash(`{"epoch": 2, "kpi": {"loss": 0.2}}`)) {
		t.Fatalf("recorded %s = %q: want the hash of the last line", RecordStatusSeen, raw)
	}
	// The job wrote one more line after the attempt that recorded this.
	f, err := os.OpenFile(filepath.Join(e.inst.Ref, "res3", "status.json"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"epoch": 3, "kpi": {"loss": 0.3}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	second, _ := wait(facts)
	if diff := cmp.Diff([]string{id + " loss 3=0.3"}, second); diff != "" {
		t.Errorf("resumed wait's points (-want +got):\n%s", diff)
	}
}

// TestNewStatusLines: the lines of a status.json's end after those taken
// before, found by the last few taken (a line written again is new when
// the lines before it differ).
func TestNewStatusLines(t *testing.T) {
	tests := map[string]struct {
		tail, lines, want []string
	}{
		"first poll":          {nil, []string{"a", "b"}, []string{"a", "b"}},
		"nothing new":         {[]string{"a", "b"}, []string{"a", "b"}, []string{}},
		"two new":             {[]string{"a", "b"}, []string{"a", "b", "c", "d"}, []string{"c", "d"}},
		"window moved":        {[]string{"a", "b"}, []string{"b", "c"}, []string{"c"}},
		"a line again":        {[]string{"a", "x"}, []string{"a", "x", "x"}, []string{"x"}},
		"tail gone (rewrite)": {[]string{"a", "b"}, []string{"p", "q"}, []string{"p", "q"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := newStatusLines(tt.tail, tt.lines)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitStreamsBigLog reads a log larger than one poll's chunk whole.
func TestWaitStreamsBigLog(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-big-a"
	e.runJob(t, e.steps, id, with("command", "seq 1 150000"))
	log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 150000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	got := log.String()
	start := strings.Index(got, "\n1\n") + 1
	end := strings.Index(got, "\n150000\n") + len("\n150000\n")
	if start <= 0 || end < start || got[start:end] != want.String() {
		t.Errorf("the log of seq 1 150000 did not arrive whole and once (%d bytes of node log)", len(got))
	}
}

// TestWaitResumesLogOffsets: a wait records how much of each job's log its
// node log holds (whole lines only), and a later attempt given those facts
// (a resumed run) writes only what follows.
func TestWaitResumesLogOffsets(t *testing.T) {
	e := newEnv(t)
	e.runJob(t, e.steps, "tf-r1-t-c0", with("command", "printf 'one\\ntwo\\nthree\\nfour'"))
	e.runJob(t, e.steps, "tf-r1-t-c1", with("command", "echo five"))
	jobs := []Job{{ID: "tf-r1-t-c0"}, {ID: "tf-r1-t-c1"}}
	wait := func(facts map[string]string) (string, map[string]string) {
		t.Helper()
		log, recorded := &logBuf{}, map[string]string{}
		err := e.steps.Do(t.Context(), Request{
			NodeID: "wait@a", Step: &plan.Step{ID: "wait", Uses: plan.KindWait},
			Instance: e.inst, Jobs: jobs, Log: log, Progress: func(progress.Report) {},
			Facts: facts, Record: func(k, v string) { recorded[k] = v },
		})
		if err != nil {
			t.Fatalf("wait: %v\nlog:\n%s", err, log)
		}
		return log.String(), recorded
	}
	first, facts := wait(nil)
	for _, l := range []string{"[tf-r1-t-c0] one\n", "[tf-r1-t-c0] four\n", "[tf-r1-t-c1] five\n"} {
		if !strings.Contains(first, l) {
			t.Errorf("first wait's log lacks %q:\n%s", l, first)
		}
	}
	var got map[string]int64
	if err := json.Unmarshal([]byte(facts[RecordLogOffsets]), &got); err != nil {
		t.Fatalf("recorded %s = %q: %v", RecordLogOffsets, facts[RecordLogOffsets], err)
	}
	if diff := cmp.Diff(map[string]int64{"tf-r1-t-c0": int64(len("one\ntwo\nthree\nfour")), "tf-r1-t-c1": 5}, got); diff != "" {
		t.Errorf("recorded offsets (-want +got):\n%s", diff)
	}

	// An attempt that stopped after "two\n" and most of "three".
	second, _ := wait(map[string]string{RecordLogOffsets: `{"tf-r1-t-c0": 8}`})
	if strings.Contains(second, "] one") || strings.Contains(second, "] two") {
		t.Errorf("the resumed wait wrote lines the node log already holds:\n%s", second)
	}
	for _, l := range []string{"[tf-r1-t-c0] three\n", "[tf-r1-t-c0] four\n", "[tf-r1-t-c1] five\n",
		"job tf-r1-t-c0: its log continues after the 8 bytes written here before"} {
		if strings.Count(second, l) != 1 {
			t.Errorf("resumed wait's log has %q %d times, want once:\n%s", l, strings.Count(second, l), second)
		}
	}

	// Unreadable facts: the logs are read from the start, with a word why.
	third, _ := wait(map[string]string{RecordLogOffsets: `{`})
	if !strings.Contains(third, "[tf-r1-t-c0] one\n") || !strings.Contains(third, "recorded offsets are unreadable") {
		t.Errorf("with unreadable facts the log should start over and say so:\n%s", third)
	}
}

// TestRunIdempotent submits the same job twice: it runs once.
func TestRunIdempotent(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-once-a"
	w := with("command", `echo launch >> "$HOME/launches"; sleep 0.3`)
	first := e.runJob(t, e.steps, id, w)
	second := e.runJob(t, e.steps, id, w)
	if !strings.Contains(first.String(), "launched job "+id) {
		t.Errorf("first run log:\n%s", first)
	}
	if !strings.Contains(second.String(), "adopted existing job "+id) {
		t.Errorf("second run log does not say it adopted the job:\n%s", second)
	}
	if log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id}); err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	third := e.runJob(t, e.steps, id, w) // after the job ended, too
	if !strings.Contains(third.String(), "adopted existing job") {
		t.Errorf("run after the end did not adopt:\n%s", third)
	}
	b, err := os.ReadFile(filepath.Join(e.inst.Ref, "launches"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "launch\n"); n != 1 {
		t.Errorf("the command ran %d times, want 1", n)
	}
}

func TestWaitOutcomes(t *testing.T) {
	tests := map[string]struct {
		cmd       string
		workdir   string
		wantClass string
		wantCode  int
	}{
		"exit 0":               {cmd: "true"},
		"exit 3":               {cmd: "echo failing; exit 3", wantClass: ClassJobFailed, wantCode: 3},
		"killed by a signal":   {cmd: "kill -TERM $$", wantClass: ClassJobFailed, wantCode: 143},
		"command not found":    {cmd: "no-such-command-taoflow", wantClass: ClassJobFailed, wantCode: 127},
		"workdir":              {cmd: `[ "$(pwd)" = "$HOME/wd" ]`, workdir: "~/wd"},
		"runs in home":         {cmd: `[ "$(pwd)" = "$HOME" ]`},
		"quotes stay verbatim": {cmd: `[ 'it'"'"'s' = "it's" ] && [ "$(printf '%s' '$x')" = '$x' ]`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.Mkdir(filepath.Join(e.inst.Ref, "wd"), 0o700); err != nil {
				t.Fatal(err)
			}
			w := with("command", tt.cmd)
			if tt.workdir != "" {
				w = with("command", tt.cmd, "workdir", tt.workdir)
			}
			e.runJob(t, e.steps, "tf-r1-job-a", w)
			log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: "tf-r1-job-a"})
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("wait: %v\n%s", err, log)
				}
				return
			}
			se := stepError(t, err)
			if se.Class != tt.wantClass || se.Code != tt.wantCode || se.ExitCode() != tt.wantCode {
				t.Errorf("error = %+v, want class %q code %d", se, tt.wantClass, tt.wantCode)
			}
			if want := fmt.Sprintf("job tf-r1-job-a exited with code %d", tt.wantCode); se.Msg != want {
				t.Errorf("message %q, want %q", se.Msg, want)
			}
		})
	}
}

func TestRunLaunchFailed(t *testing.T) {
	e := newEnv(t)
	log := &logBuf{}
	err := e.steps.Do(t.Context(), Request{
		Step: &plan.Step{ID: "train", Uses: plan.KindRun}, Instance: e.inst,
		With: with("command", "true", "workdir", "~/missing"), JobID: "tf-r1-train-a", Log: log,
	})
	se := stepError(t, err)
	if se.Class != ClassLaunchFailed || !strings.Contains(se.Msg, "working directory ~/missing does not exist") {
		t.Errorf("error = %v", err)
	}
	// A failed launch leaves nothing behind, so a retry launches.
	if _, err := os.Stat(e.jobDir("tf-r1-train-a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job directory after a failed launch: %v", err)
	}
}

// TestWaitTimeout: with.timeout cancels the job, whose process group is
// then gone, and the job is marked canceled with the exit code of TERM.
func TestWaitTimeout(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-slow-a"
	e.runJob(t, e.steps, id, with("command", "echo started; sleep 30"))
	pid := e.jobPid(t, id)
	log, _, err := e.waitJobs(t.Context(), e.steps, with("timeout", "300ms"), Job{ID: id})
	se := stepError(t, err)
	if se.Class != ClassTimedOut {
		t.Fatalf("error = %v, want timed out\n%s", err, log)
	}
	if groupAlive(t, pid) {
		t.Errorf("process group %d of the timed-out job still has live processes", pid)
	}
	for _, f := range []string{"canceled", "rc"} {
		if _, err := os.Stat(filepath.Join(e.jobDir(id), f)); err != nil {
			t.Errorf("job directory lacks %s: %v", f, err)
		}
	}
	if rc, _ := os.ReadFile(filepath.Join(e.jobDir(id), "rc")); strings.TrimSpace(string(rc)) != "143" {
		t.Errorf("rc = %q, want 143", rc)
	}
	if !strings.Contains(log.String(), "started") {
		t.Errorf("the job's output is not in the log:\n%s", log)
	}
}

// TestWaitContextCanceled: a cancelled context kills the job and Do
// returns the context's cause.
func TestWaitContextCanceled(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-slow-a"
	// The job ignores TERM, so the cancel has to escalate to KILL.
	e.runJob(t, e.steps, id, with("command", `trap '' TERM; echo ready; sleep 30 & wait`))
	pid := e.jobPid(t, id)
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("user pressed Ctrl-C")
	prog := func(progress.Report) {}
	log := &logBuf{}
	done := make(chan error, 1)
	go func() {
		done <- e.steps.Do(ctx, Request{
			Step: &plan.Step{ID: "wait", Uses: plan.KindWait}, Instance: e.inst,
			Jobs: []Job{{ID: id}}, Log: log, Progress: prog,
		})
	}()
	testrig.Eventually(t, 10*time.Second, "the job's first line in the log", func() bool { return strings.Contains(log.String(), "ready") })
	cancel(cause)
	err := <-done
	if !errors.Is(err, cause) {
		t.Fatalf("Do = %v, want the cause %v", err, cause)
	}
	if groupAlive(t, pid) {
		t.Errorf("process group %d still has live processes after the cancel", pid)
	}
	if _, err := os.Stat(filepath.Join(e.jobDir(id), "canceled")); err != nil {
		t.Errorf("no canceled marker: %v", err)
	}
	// A later wait (a resume) reports the job as canceled.
	_, _, err = e.waitJobs(t.Context(), e.steps, nil, Job{ID: id})
	if se := stepError(t, err); se.Class != ClassCanceled {
		t.Errorf("wait after cancel = %v, want canceled", err)
	}
}

// TestWaitKilledFromOutside: kill -9 of the job's pid is a failure, not a
// cancel, and no process of the job is left.
func TestWaitKilledFromOutside(t *testing.T) {
	e := newEnv(t)
	const id = "tf-r1-victim-a"
	e.runJob(t, e.steps, id, with("command", "sleep 30"))
	pid := e.jobPid(t, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id})
	se := stepError(t, err)
	if se.Class != ClassVanished && (se.Class != ClassJobFailed || se.Code != 137) {
		t.Errorf("error = %+v, want job vanished or failed with 137\n%s", se, log)
	}
	if groupAlive(t, pid) {
		t.Errorf("the rest of the job (group %d) is still running", pid)
	}
}

func TestWaitMissingJob(t *testing.T) {
	e := newEnv(t)
	_, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: "tf-r1-never-a"})
	if se := stepError(t, err); se.Class != ClassVanished {
		t.Errorf("error = %v, want job vanished", err)
	}
}

// TestWaitSeveralJobs waits for two jobs in one node: both logs arrive,
// labelled, and the failure of one is the node's error.
func TestWaitSeveralJobs(t *testing.T) {
	e := newEnv(t)
	e.runJob(t, e.steps, "tf-r1-t-c0", with("command", "echo zero; sleep 0.2"))
	e.runJob(t, e.steps, "tf-r1-t-c1", with("command", "echo one; exit 5"))
	log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: "tf-r1-t-c0"}, Job{ID: "tf-r1-t-c1"})
	if se := stepError(t, err); se.Class != ClassJobFailed || se.Code != 5 {
		t.Errorf("error = %v, want job failed 5", err)
	}
	for _, l := range []string{"[tf-r1-t-c0] zero\n", "[tf-r1-t-c1] one\n"} {
		if strings.Count(log.String(), l) != 1 {
			t.Errorf("log has %q %d times:\n%s", l, strings.Count(log.String(), l), log)
		}
	}
}

// TestSecretsReachJobOnly: a secret in with.env is in the job's
// environment, on no process's command line, and in no log or error.
func TestSecretsReachJobOnly(t *testing.T) {
	const value = "s3cr3t-value-123"
	e := newEnv(t, func(c *Config) { c.Secrets = testSecrets(t, "MY_SECRET", value, "OTHER", "other-value-456") })
	const id = "tf-r1-secret-a"
	cmd := `printf %s "$MY_SECRET" > "$HOME/seen"; [ -z "${OTHER:-}" ] || echo "OTHER leaked" >> "$HOME/seen"; echo "using the secret"; sleep 1; exit 7`
	runLog := e.runJob(t, e.steps, id, with("command", cmd, "env", []string{"MY_SECRET"}))
	seen := filepath.Join(e.inst.Ref, "seen")
	testrig.Eventually(t, 10*time.Second, "the job to write the secret", func() bool { _, err := os.Stat(seen); return err == nil })
	for _, p := range testrig.ProcessesWith(value) {
		t.Errorf("process %d's command line holds the secret value: %q", p.PID, p.Cmdline())
	}
	waitLog, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id})
	if se := stepError(t, err); se.Code != 7 {
		t.Errorf("wait = %v, want exit 7", err)
	}
	got, _ := os.ReadFile(seen)
	if string(got) != value {
		t.Errorf("the job saw %q, want the secret value (and no other secret)", got)
	}
	for name, s := range map[string]string{"run log": runLog.String(), "wait log": waitLog.String(), "error": err.Error()} {
		if strings.Contains(s, value) {
			t.Errorf("%s contains the secret value: %q", name, s)
		}
	}
	// A job that prints the secret has it masked in the node log.
	e.runJob(t, e.steps, "tf-r1-leaky-a", with("command", `echo "key is $MY_SECRET"`, "env", []string{"MY_SECRET"}))
	leakLog, _, _ := e.waitJobs(t.Context(), e.steps, nil, Job{ID: "tf-r1-leaky-a"})
	if strings.Contains(leakLog.String(), value) || !strings.Contains(leakLog.String(), "key is ***") {
		t.Errorf("a printed secret is not masked in the node log:\n%s", leakLog)
	}
}

func TestRunUndeclaredSecret(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Secrets = testSecrets(t, "A", "aaaa-value") })
	err := e.steps.Do(t.Context(), Request{
		Step: &plan.Step{ID: "train", Uses: plan.KindRun}, Instance: e.inst,
		With: with("command", "true", "env", []string{"B"}), JobID: "tf-r1-train-a",
	})
	if se := stepError(t, err); se.Class != ClassInvalidConfig || !strings.Contains(se.Msg, "secret B") {
		t.Errorf("error = %v", err)
	}
}

// TestCleanup stops every running job of the run on the instance and
// leaves other runs' jobs alone, also one whose id starts with this run's
// prefix (run "r1-x" against run "r1").
func TestCleanup(t *testing.T) {
	e := newEnv(t)
	other, prefixed := e.newSteps("r2"), e.newSteps("r1-x")
	w := with("command", "sleep 30")
	e.runJob(t, e.steps, "tf-r1-train-c0", w)
	e.runJob(t, e.steps, "tf-r1-train-c1", with("command", "trap '' TERM; sleep 30 & wait"))
	e.runJob(t, e.steps, "tf-r1-done-a", with("command", "true"))
	e.runJob(t, other, "tf-r2-train-c0", w)
	e.runJob(t, prefixed, "tf-r1-x-train-c0", w)
	testrig.Eventually(t, 10*time.Second, "the short job to end", func() bool {
		_, err := os.Stat(filepath.Join(e.jobDir("tf-r1-done-a"), "rc"))
		return err == nil
	})
	pids := map[string]int{}
	for _, id := range []string{"tf-r1-train-c0", "tf-r1-train-c1", "tf-r2-train-c0", "tf-r1-x-train-c0"} {
		pids[id] = e.jobPid(t, id)
	}
	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Fatal(err)
	}
	var stopped, running []string
	for id, pid := range pids {
		if groupAlive(t, pid) {
			running = append(running, id)
		} else {
			stopped = append(stopped, id)
		}
	}
	slices.Sort(stopped)
	slices.Sort(running)
	want := struct{ Stopped, Running []string }{
		Stopped: []string{"tf-r1-train-c0", "tf-r1-train-c1"},
		Running: []string{"tf-r1-x-train-c0", "tf-r2-train-c0"},
	}
	if diff := cmp.Diff(want, struct{ Stopped, Running []string }{stopped, running}); diff != "" {
		t.Errorf("after Cleanup (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(e.jobDir("tf-r1-done-a"), "canceled")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a job that had ended was marked canceled")
	}
	// The run's job directories are removed; other runs' are not theirs.
	for id, mine := range map[string]bool{"tf-r1-train-c0": true, "tf-r1-done-a": true, "tf-r2-train-c0": false, "tf-r1-x-train-c0": false} {
		_, err := os.Stat(e.jobDir(id))
		if removed := errors.Is(err, os.ErrNotExist); removed != mine {
			t.Errorf("job directory of %s: removed = %v, want %v", id, removed, mine)
		}
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	e.runJob(t, e.steps, "tf-r1-train-a", with("command", "sleep 30"))
	pid := e.jobPid(t, "tf-r1-train-a")
	var released []bool
	log := &logBuf{}
	err := e.steps.Do(context.Background(), Request{
		Step: &plan.Step{ID: "teardown", Uses: plan.KindDelete}, Instance: e.inst,
		With: with("force", true), Log: log,
		Release: func(ctx context.Context, force bool) error {
			if groupAlive(t, pid) {
				t.Errorf("Release was called while the job still ran")
			}
			released = append(released, force)
			return e.local.Delete(ctx, e.inst)
		},
	})
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, log)
	}
	if diff := cmp.Diff([]bool{true}, released); diff != "" {
		t.Errorf("Release calls (-want +got):\n%s", diff)
	}
	// Cleanup of an instance that is gone has nothing to do.
	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Errorf("Cleanup of a deleted instance: %v", err)
	}
}

// TestWaitJobsOnTwoInstances waits, from a, for a job on a and one on b.
func TestWaitJobsOnTwoInstances(t *testing.T) {
	e := newEnv(t)
	b, err := e.local.Create(context.Background(), "r1", platform.Spec{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killJobs(b) })
	e.runJob(t, e.steps, "tf-r1-t-a", with("command", "echo on a"))
	if err := e.steps.Do(context.Background(), Request{
		Step: &plan.Step{ID: "t", Uses: plan.KindRun}, Instance: b, With: with("command", "echo on b; hostname > /dev/null"), JobID: "tf-r1-t-b",
	}); err != nil {
		t.Fatal(err)
	}
	log, _, err := e.waitJobs(context.Background(), e.steps, nil, Job{ID: "tf-r1-t-a"}, Job{ID: "tf-r1-t-b", Instance: b})
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	for _, l := range []string{"[tf-r1-t-a] on a\n", "[tf-r1-t-b] on b\n"} {
		if strings.Count(log.String(), l) != 1 {
			t.Errorf("log has %q %d times:\n%s", l, strings.Count(log.String(), l), log)
		}
	}
}
