package steps

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// TestContainerEndToEnd runs auth → pull → run → wait → upload → delete
// on a local sandbox against a real registry (whose only user is the
// literal $oauthtoken) and a real S3 server, with the trainer image.
func TestContainerEndToEnd(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	reg := startOAuthRegistry(t)
	s3 := testrig.StartS3(t)
	ref := reg.push(t, image)
	secrets := []string{"NGC_KEY", reg.Password, "AWS_ACCESS_KEY_ID", s3.AccessKey, "AWS_SECRET_ACCESS_KEY", s3.SecretKey}
	e := newDockerEnv(t, nil, func(c *Config) { c.Secrets = testSecrets(t, secrets...) })
	bucket := e.run
	s3.CreateBucket(t, bucket)
	var logs []*logBuf
	check := func(what string, log *logBuf, err error) {
		t.Helper()
		logs = append(logs, log)
		if err != nil {
			t.Fatalf("%s: %v\nlog:\n%s", what, err, log)
		}
	}

	stop := sampleCmdlines(reg.Password, s3.SecretKey)
	log, err := e.do(t.Context(), plan.KindNGCAuth, with("registry", reg.Addr, "verify_image", ref))
	if hits := stop(); len(hits) > 0 {
		t.Errorf("the key was on a command line during the login: %q", hits)
	}
	check("ngc-auth", log, err)
	if diff := cmp.Diff([]string{"$oauthtoken"}, reg.Users()); diff != "" {
		t.Errorf("user names the registry saw (-want +got):\n%s", diff)
	}
	// docker stored exactly that user (and the key) in the sandbox's own config.
	var cfg struct {
		Auths map[string]struct{ Auth string }
	}
	b, err := os.ReadFile(filepath.Join(e.inst.Ref, ".docker", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(cfg.Auths[reg.Addr].Auth); string(got) != "$oauthtoken:"+reg.Password {
		t.Errorf("the sandbox's docker config does not hold $oauthtoken and the key for %s", reg.Addr)
	}

	recorded := map[string]string{}
	log, err = e.do(t.Context(), plan.KindPull, with("image", ref), func(r *Request) { r.Record = func(k, v string) { recorded[k] = v } })
	check("pull", log, err)
	digest := recorded[RecordDigest]
	if recorded[RecordImage] != ref || !strings.HasPrefix(digest, reg.Addr+"/taoflow/trainer@sha256:") {
		t.Errorf("pull recorded %q", recorded)
	}
	if !strings.Contains(log.String(), digest) {
		t.Errorf("the pull log does not name the digest:\n%s", log)
	}

	job := e.job("train")
	log = e.runContainer(t, job, "image", ref, "command", "-epochs 3 -sleep 150ms -print-env NGC_KEY -print-env OTHER",
		"volumes", []string{"~/results:/results"}, "env", []string{"NGC_KEY"},
		"memory", "256m", "shm_size", "64m", "ipc", "private", "workdir", "/results")
	logs = append(logs, log)
	if !strings.Contains(log.String(), "launched container "+job) {
		t.Errorf("run log:\n%s", log)
	}
	wlog, prog, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: job, Image: ref, Results: "~/results"})
	check("wait", wlog, err)
	if os.Getenv("TAOFLOW_SHOW_LOGS") != "" {
		t.Logf("run log:\n%s\nwait log:\n%s", log, wlog)
	}
	for _, want := range []string{"trainer: started epochs=3", "Epoch 3/3", fmt.Sprintf("NGC_KEY has %d bytes", len(reg.Password)), "OTHER is unset", "trainer: done"} {
		if strings.Count(wlog.String(), want) != 1 {
			t.Errorf("the wait log has %q %d times, want once:\n%s", want, strings.Count(wlog.String(), want), wlog)
		}
	}
	if p := prog.get(); len(p) == 0 || !strings.HasPrefix(p[len(p)-1], "epoch 3/3 loss 0.25") {
		t.Errorf("progress = %q, want it to end on epoch 3/3", p)
	}
	// Each status.json line the container wrote is a point, once; its
	// output's "Epoch 3/3: loss=" lines give none beside them.
	wantPts := []string{job + " loss 1=0.5", job + " loss 2=0.3333333333333333", job + " loss 3=0.25"}
	if diff := cmp.Diff(wantPts, prog.series()); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	// docker inspect shows the key only in the environment of the job that
	// asked for it (env: [NGC_KEY]): not in its command, labels or other
	// settings, and not in the image.
	raw, err := testrig.Docker(t, "inspect", "--type", "container", job)
	if err != nil {
		t.Fatal(err)
	}
	var inspected []struct{ Config struct{ Env []string } }
	if err := json.Unmarshal([]byte(raw), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("docker inspect %s: %v\n%s", job, err, raw)
	}
	inEnv := 0
	for _, kv := range inspected[0].Config.Env {
		if kv == "NGC_KEY="+reg.Password {
			inEnv++
		}
	}
	if all := strings.Count(raw, reg.Password); inEnv != 1 || all != 1 {
		t.Errorf("docker inspect of the job shows the key %d times, %d of them as NGC_KEY in its environment; want once, there", all, inEnv)
	}
	if raw, err := testrig.Docker(t, "image", "inspect", ref); err != nil || strings.Contains(raw, reg.Password) {
		t.Errorf("docker image inspect %s (err %v) holds the key", ref, err)
	}

	log, err = e.do(t.Context(), plan.KindUploadS3, with("from", "~/results", "to", "s3://"+bucket+"/"+e.run+"/a",
		"endpoint_url", s3.Endpoint, "region", s3.Region))
	check("upload-s3", log, err)
	got := s3.List(t, bucket, e.run+"/a/")
	want := map[string]int64{}
	for _, name := range []string{"status.json", "model_epoch_000_step_00010.pth", "model_epoch_001_step_00020.pth", "model_epoch_002_step_00030.pth"} {
		fi, err := os.Stat(filepath.Join(e.inst.Ref, "results", name))
		if err != nil {
			t.Fatal(err)
		}
		want[e.run+"/a/"+name] = fi.Size()
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k string, _ int64) bool { return strings.HasSuffix(k, manifestName) })); diff != "" {
		t.Errorf("objects in S3 (-want +got):\n%s", diff)
	}
	out, err := s3.AWS(t, "s3", "cp", "s3://"+bucket+"/"+e.run+"/a/"+manifestName, "-")
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("the manifest in S3 is not JSON: %v\n%s", err, out)
	}
	if m.Files != 4 || m.RunID != e.run || m.Images[ref] != digest || m.To != "s3://"+bucket+"/"+e.run+"/a" {
		t.Errorf("manifest = %+v", m)
	}

	var released int
	log, err = e.do(t.Context(), plan.KindDelete, nil, func(r *Request) {
		r.Release = func(ctx context.Context, force bool) error {
			released++
			return e.local.Delete(ctx, e.inst)
		}
	})
	check("delete", log, err)
	if n := containers(t, labelRun+"="+e.run); released != 1 || len(n) != 0 {
		t.Errorf("after delete: released %d times, containers %q", released, n)
	}
	for _, l := range logs {
		for _, v := range []string{reg.Password, s3.SecretKey, s3.AccessKey} {
			if strings.Contains(l.String(), v) {
				t.Errorf("a node log holds a secret value:\n%s", l)
			}
		}
	}
}

// TestNGCAuthFails: a wrong key is "auth failed" and stays out of the
// error and the log; a refused image after a good login is "no
// entitlement".
func TestNGCAuthFails(t *testing.T) {
	reg := startOAuthRegistry(t)
	const wrong = "nvapi-wrong-key-0123456789abcdef"
	tests := map[string]struct {
		key       string
		with      *plan.Value
		wantClass string
		wantMsg   []string
	}{
		"wrong key": {
			key: wrong, with: with("registry", reg.Addr),
			wantClass: ClassAuthFailed, wantMsg: []string{"docker login " + reg.Addr + " as $oauthtoken", "failed (check the key in NGC_KEY)", "401 Unauthorized"},
		},
		"wrong user": {
			key: reg.Password, with: with("registry", reg.Addr, "username", "someone"),
			wantClass: ClassAuthFailed, wantMsg: []string{"as someone"},
		},
		"image refused": {
			key: reg.Password, with: with("registry", reg.Addr, "verify_image", reg.Addr+"/nvidia/not-entitled:1"),
			wantClass: ClassNoEntitlement, wantMsg: []string{"logged in to " + reg.Addr + ", but " + reg.Addr + "/nvidia/not-entitled:1 is refused"},
		},
		"key under another name": {
			key: reg.Password, with: with("registry", reg.Addr, "secret", "MY_KEY"),
			wantClass: ClassInvalidConfig, wantMsg: []string{"secret MY_KEY has no value"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newDockerEnv(t, nil, func(c *Config) { c.Secrets = testSecrets(t, "NGC_KEY", tt.key) })
			log, err := e.do(t.Context(), plan.KindNGCAuth, tt.with)
			se := stepError(t, err)
			if se.Class != tt.wantClass {
				t.Errorf("error = %v, want class %q\nlog:\n%s", err, tt.wantClass, log)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(se.Msg, w) {
					t.Errorf("message %q lacks %q", se.Msg, w)
				}
			}
			for what, s := range map[string]string{"error": err.Error(), "log": log.String()} {
				if strings.Contains(s, tt.key) {
					t.Errorf("the %s holds the key: %s", what, s)
				}
			}
		})
	}
}

// TestContainerOutcomes runs containers that end in every way a job
// ends, and launches that fail in each of docker run's ways.
func TestContainerOutcomes(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	noEntry := noEntryImage(t)
	tests := map[string]struct {
		with      []any
		runClass  string // the run step fails with this class
		wantClass string // else the wait fails with this class ("" for success)
		wantCode  int
		wantMsg   string
		wantLog   string
	}{
		"success": {with: []any{"command", "-epochs 1 -sleep 1ms"}},
		"exit 3": {
			with:      []any{"command", "-epochs 1 -sleep 1ms -fail-code 3"},
			wantClass: ClassJobFailed, wantCode: 3, wantMsg: "exited with code 3",
		},
		"oom": {
			with:      []any{"command", "-oom-mb 200", "memory", "32m"},
			wantClass: ClassJobFailed, wantCode: 137, wantMsg: "failed: oom",
		},
		"no such image": {
			with:     []any{"image", "127.0.0.1:9/taoflow/none:1", "command", "-epochs 1"},
			runClass: ClassLaunchFailed, wantCode: 125, wantMsg: "docker could not start the container (exit code 125)",
		},
		"command not found": {
			with:     []any{"image", noEntry, "command", "/no-such-program -x"},
			runClass: ClassLaunchFailed, wantCode: 127, wantMsg: "the container's command was not found (exit code 127)",
		},
		"command cannot be invoked": {
			with:     []any{"image", noEntry, "command", "/"},
			runClass: ClassLaunchFailed, wantCode: 126, wantMsg: "the container's command cannot be invoked (exit code 126)",
		},
		"shell syntax in the command": {
			with:     []any{"command", "-epochs 1 && touch ~/pwned"},
			runClass: ClassInvalidConfig, wantMsg: `'&' is shell syntax`,
		},
		"quoted words": {
			with:    []any{"command", `-print-env 'A B' "-epochs" 1 -sleep=1\ms -print-env "it's"`},
			wantLog: "A B is unset\nit's is unset\n",
		},
	}
	e := newDockerEnv(t, nil)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			id := e.job(strings.ReplaceAll(name, " ", "_"))
			pairs := append([]any{"image", image}, tt.with...)
			if slices.Contains(tt.with, any("image")) {
				pairs = tt.with
			}
			log, err := e.do(t.Context(), plan.KindRun, with(pairs...), func(r *Request) { r.JobID = id })
			if tt.runClass != "" {
				se := stepError(t, err)
				if se.Class != tt.runClass || se.Code != tt.wantCode || !strings.Contains(se.Msg, tt.wantMsg) {
					t.Errorf("run = %+v, want class %q code %d and %q\nlog:\n%s", se, tt.runClass, tt.wantCode, tt.wantMsg, log)
				}
				if exists(t, id) {
					t.Errorf("a failed launch left container %s behind: a retry would adopt it", id)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v\n%s", err, log)
			}
			wlog, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Image: image})
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("wait: %v\n%s", err, wlog)
				}
				if !strings.Contains(wlog.String(), tt.wantLog) {
					t.Errorf("wait log lacks %q:\n%s", tt.wantLog, wlog)
				}
				return
			}
			se := stepError(t, err)
			if se.Class != tt.wantClass || se.Code != tt.wantCode || !strings.Contains(se.Msg, tt.wantMsg) {
				t.Errorf("wait = %+v, want class %q code %d and %q\nlog:\n%s", se, tt.wantClass, tt.wantCode, tt.wantMsg, wlog)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(e.inst.Ref, "pwned")); err == nil {
		t.Errorf("shell syntax in a command ran on the instance")
	}
}

// TestContainerCancel: a cancelled context, or with.timeout, stops the
// container (TERM, then KILL for one that ignores it), reads its last
// log lines, and removes it; a later wait reports it canceled.
func TestContainerCancel(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	tests := map[string]struct {
		command  string
		timeout  string
		wantLine string
	}{
		"TERM":         {command: "-epochs 1 -sleep 1ms -hang", wantLine: "trainer: SIGTERM, exiting 143"},
		"ignores TERM": {command: "-epochs 1 -sleep 1ms -hang -ignore-term", wantLine: "stopping container(s) "},
		"timeout":      {command: "-epochs 1 -sleep 1ms -hang", timeout: "1s", wantLine: "trainer: SIGTERM, exiting 143"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newDockerEnv(t, nil)
			id := e.job("train")
			e.runContainer(t, id, "image", image, "command", tt.command)
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			cause := errors.New("user pressed Ctrl-C")
			var w *plan.Value
			if tt.timeout != "" {
				w = with("timeout", tt.timeout)
			}
			log, prog := &logBuf{}, &progressLog{}
			done := make(chan error, 1)
			go func() {
				done <- e.steps.Do(ctx, Request{
					Step: &plan.Step{ID: "wait", Uses: plan.KindWait}, Instance: e.inst, With: w,
					Jobs: []Job{{ID: id, Image: image}}, Log: log, Progress: prog.add,
				})
			}()
			testrig.Eventually(t, 10*time.Second, "the trainer to hang", func() bool { return strings.Contains(log.String(), "trainer: hanging") })
			if tt.timeout == "" {
				cancel(cause)
			}
			err := <-done
			if tt.timeout == "" && !errors.Is(err, cause) {
				t.Errorf("Do = %v, want the cause %v", err, cause)
			}
			if se := (*Error)(nil); tt.timeout != "" && (!errors.As(err, &se) || se.Class != ClassTimedOut) {
				t.Errorf("Do = %v, want timed out", err)
			}
			if !strings.Contains(log.String(), tt.wantLine) || !strings.Contains(log.String(), "removed container(s) "+id) {
				t.Errorf("log lacks %q or the removal:\n%s", tt.wantLine, log)
			}
			if exists(t, id) {
				t.Errorf("container %s still exists after the cancel", id)
			}
			if _, err := os.Stat(filepath.Join(e.jobDir(id), "canceled")); err != nil {
				t.Errorf("no cancel marker: %v", err)
			}
			_, _, err = e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Image: image})
			if se := stepError(t, err); se.Class != ClassCanceled {
				t.Errorf("wait after the cancel = %v, want canceled", err)
			}
		})
	}
}

// TestContainerVanished: a container removed by hand while a wait polls
// it is a vanished job, after the reconcile by label found nothing.
func TestContainerVanished(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	var polls atomic.Int32
	var id string
	e := newDockerEnv(t, func(p platform.Platform) platform.Platform {
		return &hookPlatform{Platform: p, before: func(script string) {
			if isPoll(script) && polls.Add(1) == 3 {
				if _, err := testrig.Docker(t, "rm", "-f", id); err != nil {
					t.Errorf("removing by hand: %v", err)
				}
			}
		}}
	})
	id = e.job("train")
	e.runContainer(t, id, "image", image, "command", "-epochs 1 -sleep 1ms -hang")
	log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Image: image})
	se := stepError(t, err)
	if se.Class != ClassVanished || !strings.Contains(se.Msg, "no container named "+id+" or labelled tao-job="+id) {
		t.Errorf("wait = %v, want job vanished after the label lookup\nlog:\n%s", err, log)
	}
}

// TestContainerAdopt: a retried run adopts the container (by name, then
// by label when it was renamed) instead of launching a second one.
func TestContainerAdopt(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	e := newDockerEnv(t, nil)
	id := e.job("train")
	run := func() string {
		return e.runContainer(t, id, "image", image, "command", "-epochs 1 -sleep 300ms").String()
	}
	count := func() int { return len(containers(t, labelJob+"="+id)) }
	if l := run(); !strings.Contains(l, "launched container "+id) {
		t.Errorf("first run:\n%s", l)
	}
	if l := run(); !strings.Contains(l, "adopted existing container "+id) || count() != 1 {
		t.Errorf("second run (%d containers):\n%s", count(), l)
	}
	if log, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Image: image}); err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	if l := run(); !strings.Contains(l, "adopted existing container") || count() != 1 {
		t.Errorf("run after the end (%d containers):\n%s", count(), l)
	}
	if _, err := testrig.Docker(t, "rename", id, id+"-renamed"); err != nil {
		t.Fatal(err)
	}
	if l := run(); !strings.Contains(l, "adopted existing container") || count() != 1 {
		t.Errorf("run after a rename (%d containers):\n%s", count(), l)
	}
	_, _, err := e.waitJobs(t.Context(), e.steps, nil, Job{ID: id, Image: image})
	if se := stepError(t, err); se.Class != ClassVanished || !strings.Contains(se.Msg, "now named "+id+"-renamed") {
		t.Errorf("wait on a renamed container = %v", err)
	}
}

// TestContainerPollBatches waits for 20 containers on one instance: each
// poll is one Exec that runs docker inspect exactly once (counted by a
// docker wrapper in PATH), and every log arrives once.
func TestContainerPollBatches(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	calls := dockerShim(t, nil)
	inspects := func() int {
		n := 0
		for _, c := range calls() {
			if strings.HasPrefix(c, "inspect ") {
				n++
			}
		}
		return n
	}

	var mu sync.Mutex
	var perPoll []int     // docker inspect runs during each poll
	var jobsPerPoll []int // jobs each poll asked about
	counting := false
	jobPrefix := "" // set once the run is known, before counting starts
	e := newDockerEnv(t, func(p platform.Platform) platform.Platform {
		return &countPlatform{Platform: p, after: func(script string, before int) {
			mu.Lock()
			defer mu.Unlock()
			if counting && isPoll(script) {
				perPoll = append(perPoll, inspects()-before)
				// Each job's id is in the poll's tf_probes once.
				jobsPerPoll = append(jobsPerPoll, strings.Count(script, jobPrefix))
			}
		}, count: inspects}
	})
	const n = 20
	jobPrefix = plan.JobPrefix(e.run) + "train."
	jobs := make([]Job, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range jobs {
		jobs[i] = Job{ID: plan.JobID(e.run, "train", fmt.Sprintf("c%d", i)), Image: image}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e.runContainer(t, jobs[i].ID, "image", image, "command", "-epochs 3 -sleep 1s")
		}()
	}
	wg.Wait()
	mu.Lock()
	counting = true
	mu.Unlock()
	log, _, err := e.waitJobs(t.Context(), e.steps, with("interval", "100ms"), jobs...)
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(perPoll) < 2 || len(perPoll) >= n {
		t.Errorf("%d polls for %d jobs, want several, and fewer than one per job", len(perPoll), n)
	}
	if len(jobsPerPoll) == 0 || jobsPerPoll[0] != n {
		t.Errorf("jobs per poll: %v, want the first poll to ask about all %d", jobsPerPoll, n)
	}
	for i, c := range perPoll {
		if c != 1 {
			t.Errorf("poll %d ran docker inspect %d times, want 1 (all: %v)", i, c, perPoll)
		}
	}
	t.Logf("%d polls for %d containers", len(perPoll), n)
	for _, j := range jobs {
		if c := strings.Count(log.String(), "["+j.ID+"] Epoch 3/3"); c != 1 {
			t.Errorf("%s's last epoch is in the log %d times", j.ID, c)
		}
	}
}

// TestContainerLogFollower: a wait does not read a running container's
// log whole at each poll: a follower (docker logs -f) copies it on the
// instance, and the polls read the copy, to its end once the container has
// stopped. The node log gets every line once, in order; the copy and the
// follower go with the container.
func TestContainerLogFollower(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	calls := dockerShim(t, nil)
	e := newDockerEnv(t, nil)
	id := e.job("train")
	e.runContainer(t, id, "image", image, "command", "-epochs 6 -sleep 50ms -wait-for /gate")
	gated := openGateAfter(t, id, func() bool { return inspectPolls(calls()) >= 8 })
	log, _, err := e.waitJobs(context.Background(), e.steps, with("interval", "100ms"), Job{ID: id, Image: image})
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	<-gated
	polls := inspectPolls(calls())
	whole, follow := logReads(calls(), id)
	if polls < 8 || follow != 1 || whole > 1 {
		t.Errorf("%d polls read the log whole %d times and followed it %d times; want one whole read (the first poll) and one follower", polls, whole, follow)
	}
	last := -1
	for k := 1; k <= 6; k++ {
		line := fmt.Sprintf("Epoch %d/6", k)
		if c := strings.Count(log.String(), line); c != 1 {
			t.Errorf("%q is in the node log %d times", line, c)
		}
		if i := strings.Index(log.String(), line); i < last {
			t.Errorf("%q came before the epoch above it", line)
		} else {
			last = i
		}
	}
	dir := filepath.Join(e.inst.Ref, jobsDir, id)
	copied, err := os.ReadFile(filepath.Join(dir, followFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := testrig.Docker(t, "logs", id)
	if err != nil || strings.TrimSpace(string(copied)) != want {
		t.Errorf("the follower's copy is not docker logs' (%v):\n%s\n---\n%s", err, copied, want)
	}
	if end, _ := os.ReadFile(filepath.Join(dir, followFile+".end")); string(end) != "0\n" {
		t.Errorf("the follower ended with %q, want 0", end)
	}

	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "docker.*")); len(left) > 0 {
		t.Errorf("log copies left after cleanup: %q", left)
	}
	testrig.Eventually(t, 10*time.Second, "the follower to end", func() bool {
		stop := sampleCmdlines("logs\x00-f\x00" + id)
		time.Sleep(5 * time.Millisecond)
		return len(stop()) == 0
	})
}

// TestContainerLogWithoutFollower: where flock fails (a HOME on a file
// system without locks), every poll reads the log whole, and the node log
// is the same.
func TestContainerLogWithoutFollower(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	calls := dockerShim(t, map[string]string{"flock": "echo 'flock: cannot lock' >&2; exit 1"})
	e := newDockerEnv(t, nil)
	id := e.job("train")
	e.runContainer(t, id, "image", image, "command", "-epochs 4 -sleep 50ms -wait-for /gate")
	gated := openGateAfter(t, id, func() bool { return inspectPolls(calls()) >= 5 })
	log, _, err := e.waitJobs(t.Context(), e.steps, with("interval", "100ms"), Job{ID: id, Image: image})
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, log)
	}
	<-gated
	whole, follow := logReads(calls(), id)
	if follow != 0 || whole < 5 {
		t.Errorf("read whole %d times, followed %d times; want a whole read at every poll and no follower", whole, follow)
	}
	for k := 1; k <= 4; k++ {
		if line := fmt.Sprintf("Epoch %d/4", k); strings.Count(log.String(), line) != 1 {
			t.Errorf("%q is in the node log %d times, want once:\n%s", line, strings.Count(log.String(), line), log)
		}
	}
}

// TestContainerLogCreatedThenStarted: without a follower, the log read of
// a container that was created but not started yet is not kept as its
// whole log: once it has run, the poll reads what it printed.
func TestContainerLogCreatedThenStarted(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	dockerShim(t, map[string]string{"flock": "exit 1"})
	e := newDockerEnv(t, nil)
	id := e.job("train")
	// Owned by this process, so a `taoflow reap` running meanwhile (the cmd
	// tests) leaves it alone.
	if _, err := testrig.Docker(t, "create", "--name", id, "--label", labelRun+"="+e.run, "--label", labelInstance+"="+e.inst.Name,
		"--label", labelOwner+"="+e.steps.cfg.Owner, image, "-epochs", "2", "-sleep", "1ms", "-results", "/tmp/r"); err != nil {
		t.Fatal(err)
	}
	rt := e.steps.runtimeFor(image)
	obs, err := rt.status(t.Context(), e.inst, []probe{{ID: id}})
	if err != nil || obs[0].State != stateRunning || len(obs[0].Log) != 0 {
		t.Fatalf("created container: %v %+v", err, obs)
	}
	if _, err := testrig.Docker(t, "start", id); err != nil {
		t.Fatal(err)
	}
	waitExited(t, id)
	obs, err = rt.status(t.Context(), e.inst, []probe{{ID: id}})
	if err != nil || obs[0].State != stateExited || !strings.Contains(string(obs[0].Log), "Epoch 2/2") {
		t.Errorf("after it ran: %v, state %v, log %q", err, obs[0].State, obs[0].Log)
	}
}

// countPlatform calls after each Exec with its script and what count
// returned before it.
type countPlatform struct {
	platform.Platform
	count func() int
	after func(script string, before int)
}

func (c *countPlatform) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	before := c.count()
	res, err := c.Platform.Exec(ctx, inst, script, stdin)
	c.after(script, before)
	return res, err
}

// TestContainerCleanup removes this run's containers (stopping the
// running one, marking it canceled) and its host processes, and leaves a
// container of another run alone.
func TestContainerCleanup(t *testing.T) {
	image := testrig.BuildTrainerImage(t, "")
	other := testrig.UniqueName(t)
	testrig.NoLeftovers(t, labelRun+"="+other)
	e := newDockerEnv(t, nil)
	// Owned by this process, so a `taoflow reap` running meanwhile (the cmd
	// tests) leaves them alone.
	owner := "--label=" + labelOwner + "=" + e.steps.cfg.Owner
	if _, err := testrig.Docker(t, "run", "-d", "--name", other, "--label", labelRun+"="+other, owner, image, "-hang"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testrig.Docker(t, "rm", "-f", other) })
	// The same run's container on another instance (local sandboxes share
	// one engine): tearing this instance down must not stop it.
	sibling := testrig.UniqueName(t)
	if _, err := testrig.Docker(t, "run", "-d", "--name", sibling, "--label", labelRun+"="+e.run, owner,
		"--label", labelInstance+"=elsewhere", image, "-hang"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testrig.Docker(t, "rm", "-f", sibling) })
	running, ended := e.job("train"), e.job("done")
	e.runContainer(t, running, "image", image, "command", "-epochs 1 -sleep 1ms -hang")
	e.runContainer(t, ended, "image", image, "command", "-epochs 1 -sleep 1ms")
	e.runJob(t, e.steps, e.job("proc"), with("command", "sleep 30"))
	pid := e.jobPid(t, e.job("proc"))
	waitExited(t, ended)
	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Fatal(err)
	}
	// This run's only: other packages' tests share the engine, and their
	// instances may have the same name.
	if got := containers(t, labelRun+"="+e.run, labelInstance+"="+e.inst.Name); len(got) != 0 {
		t.Errorf("containers of the run left on %s: %q", e.inst.Name, got)
	}
	if !exists(t, other) {
		t.Errorf("Cleanup removed another run's container")
	}
	if !exists(t, sibling) {
		t.Errorf("Cleanup removed the run's container on another instance")
	}
	if groupAlive(t, pid) {
		t.Errorf("Cleanup left the host process running")
	}
	// Their job directories (log copies, markers) go with them: on an
	// instance that outlives the run they would keep what the jobs
	// printed.
	for _, id := range []string{running, ended, e.job("proc")} {
		if _, err := os.Stat(e.jobDir(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the job directory of %s outlived Cleanup (%v)", id, err)
		}
	}
}

// TestContainerFastFailures are failures that need no registry or image.
func TestContainerFastFailures(t *testing.T) {
	tests := map[string]struct {
		uses      string
		with      *plan.Value
		jobs      []Job
		wantClass string
		wantMsg   string
	}{
		"ngc-auth without the key": {uses: plan.KindNGCAuth, wantClass: ClassInvalidConfig, wantMsg: "secret NGC_KEY has no value"},
		"pull from nowhere": {
			uses: plan.KindPull, with: with("image", "127.0.0.1:9/taoflow/none:1"),
			wantClass: ClassPullFailed, wantMsg: "docker pull 127.0.0.1:9/taoflow/none:1 on a failed",
		},
		"pull an option":         {uses: plan.KindPull, with: with("image", "--help"), wantClass: ClassInvalidConfig},
		"wait for no container":  {uses: plan.KindWait, jobs: []Job{{ID: "tf-x-none-a", Image: "img:1"}}, wantClass: ClassVanished, wantMsg: "its container is gone"},
		"bad gpus":               {uses: plan.KindRun, with: with("image", "img:1", "gpus", "two"), wantClass: ClassInvalidConfig, wantMsg: "with.gpus"},
		"expansion in a command": {uses: plan.KindRun, with: with("image", "img:1", "command", `train --key "$NGC_KEY"`), wantClass: ClassInvalidConfig, wantMsg: "inside double quotes"},
	}
	e := newDockerEnv(t, nil)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			log, err := e.do(t.Context(), tt.uses, tt.with, func(r *Request) { r.JobID = e.job("s"); r.Jobs = tt.jobs })
			se := stepError(t, err)
			if se.Class != tt.wantClass || !strings.Contains(se.Msg, tt.wantMsg) {
				t.Errorf("error = %v, want class %q with %q\nlog:\n%s", err, tt.wantClass, tt.wantMsg, log)
			}
		})
	}
}

// TestCleanupWithoutContainers: Cleanup of a run whose plan has no
// container step does not call docker at all (an instance may have no
// docker, or one this user cannot reach).
func TestCleanupWithoutContainers(t *testing.T) {
	var scripts []string
	var mu sync.Mutex
	e := newDockerEnv(t, func(p platform.Platform) platform.Platform {
		return &hookPlatform{Platform: p, before: func(s string) { mu.Lock(); scripts = append(scripts, s); mu.Unlock() }}
	}, func(c *Config) {
		c.Plan = &plan.Plan{Steps: []*plan.Step{{ID: "train", Uses: plan.KindRun, With: with("command", "true")}}}
	})
	if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(scripts) == 0 {
		t.Fatal("Cleanup ran nothing")
	}
	for _, s := range scripts {
		if strings.Contains(s, "docker") {
			t.Errorf("Cleanup ran a docker command:\n%s", s)
		}
	}
}
