package steps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/local"
)

// dockerEnv is a local sandbox instance whose steps belong to a run of
// its own (a unique taoflow.run label value), checked by
// testrig.NoLeftovers; the run's containers are removed by Cleanup at
// the end of the test.
type dockerEnv struct {
	env
	run string
}

// newDockerEnv creates sandbox "a" of a fresh run; plat, when set, wraps
// the local platform (a counting or hooking decorator).
func newDockerEnv(t testing.TB, plat func(platform.Platform) platform.Platform, mod ...func(*Config)) *dockerEnv {
	t.Helper()
	run := testrig.UniqueName(t)
	testrig.NoLeftovers(t, labelRun+"="+run)
	l := local.New(t.TempDir())
	inst, err := l.Create(context.Background(), run, platform.Spec{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	e := &dockerEnv{env: env{local: l, inst: inst}, run: run}
	var p platform.Platform = l
	if plat != nil {
		p = plat(l)
	}
	cfg := Config{Platform: p, RunID: run, PollInterval: tick}
	for _, m := range mod {
		m(&cfg)
	}
	e.steps = New(cfg)
	e.steps.process.(*process).termGrace = 300 * time.Millisecond
	e.steps.docker.(*docker).stopGrace = time.Second
	t.Cleanup(func() {
		killJobs(inst)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.steps.Cleanup(ctx, inst); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return e
}

// job returns the job id of step on this env's instance.
func (e *dockerEnv) job(step string) string { return plan.JobID(e.run, step, "a") }

// do runs one step on the env's instance.
func (e *dockerEnv) do(ctx context.Context, uses string, w *plan.Value, mod ...func(*Request)) (*logBuf, error) {
	log := &logBuf{}
	req := Request{
		NodeID: uses + "@a", Step: &plan.Step{ID: strings.ReplaceAll(uses, "-", "_"), Uses: uses},
		Instance: e.inst, With: w, Log: log, Progress: func(progress.Report) {},
	}
	for _, m := range mod {
		m(&req)
	}
	return log, e.steps.Do(ctx, req)
}

// runContainer launches image with the given with: pairs as job id.
func (e *dockerEnv) runContainer(t testing.TB, id string, pairs ...any) *logBuf {
	t.Helper()
	log, err := e.do(t.Context(), plan.KindRun, with(pairs...), func(r *Request) { r.JobID = id })
	if err != nil {
		t.Fatalf("run %s: %v\nlog:\n%s", id, err, log)
	}
	return log
}

// containers returns the names of the containers that carry every label.
func containers(t *testing.T, labels ...string) []string {
	t.Helper()
	args := []string{"ps", "-a", "--format", "{{.Names}}"}
	for _, l := range labels {
		args = append(args, "--filter", "label="+l)
	}
	out, err := testrig.Docker(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(out)
	slices.Sort(names)
	return names
}

// waitExited waits until container name has exited.
func waitExited(t *testing.T, name string) {
	t.Helper()
	testrig.Eventually(t, 10*time.Second, "container "+name+" to exit", func() bool {
		out, _ := testrig.Docker(t, "inspect", "--format", "{{.State.Status}}", name)
		return out == "exited"
	})
}

// exists reports whether container name exists.
func exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := testrig.Docker(t, "inspect", "--type", "container", name)
	return err == nil
}

// noEntryImage builds (once per test binary) the trainer image without its
// entrypoint, so that a command names the program to run: for docker
// run's 126 and 127.
func noEntryImage(t *testing.T) string {
	t.Helper()
	base := testrig.BuildTrainerImage(t, "")
	noEntry.once.Do(func() {
		dockerfile := fmt.Sprintf("FROM %s\nENTRYPOINT []\n", base)
		_, noEntry.err = testrig.DockerEnv(t, []string{"DOCKER_BUILDKIT=0"}, strings.NewReader(dockerfile),
			"build", "-q", "--label", testrig.TestLabel, "-t", noEntryTag, "-")
	})
	if noEntry.err != nil {
		t.Fatalf("building %s: %v", noEntryTag, noEntry.err)
	}
	return noEntryTag
}

const noEntryTag = "taoflow-trainer:noentry"

var noEntry struct {
	once sync.Once
	err  error
}

// oauthRegistry is a real registry (docker-registry, htpasswd auth) whose
// only account is the literal user $oauthtoken, behind a reverse proxy
// that records the basic-auth user names it sees.
type oauthRegistry struct {
	Addr     string // the proxy: what docker talks to
	Password string // the account's password: the test's "NGC key"

	mu    sync.Mutex
	users map[string]int
}

// startOAuthRegistry starts the registry and its proxy; t.Cleanup stops
// both. testrig.StartRegistry has a fixed user, so this one is built here
// the same way.
func startOAuthRegistry(t *testing.T) *oauthRegistry {
	t.Helper()
	for _, tool := range []string{"docker-registry", "htpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install it (make deps)", tool)
		}
	}
	dir := t.TempDir()
	r := &oauthRegistry{Password: "nvapi-fake-" + strings.Repeat("k3y", 8), users: map[string]int{}}
	cmd := exec.Command("htpasswd", "-niB", defaultNGCUser)
	cmd.Stdin = strings.NewReader(r.Password)
	entry, err := cmd.Output()
	if err != nil {
		t.Fatalf("htpasswd: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), entry, 0o600); err != nil {
		t.Fatal(err)
	}
	port := testrig.FreePort(t)
	cfg := fmt.Sprintf(`version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: %s}}
http: {addr: "127.0.0.1:%d", secret: taoflow-test-secret}
auth: {htpasswd: {realm: taoflow-test, path: %s}}
`, filepath.Join(dir, "storage"), port, filepath.Join(dir, "htpasswd"))
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := exec.Command("docker-registry", "serve", filepath.Join(dir, "config.yml"))
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	reg.Stdout, reg.Stderr = logf, logf
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = reg.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = reg.Process.Kill()
		<-done
	})
	backend := fmt.Sprintf("http://127.0.0.1:%d", port)
	if !testrig.Within(15*time.Second, func() bool {
		var resp *http.Response
		if resp, err = http.Get(backend + "/v2/"); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	}) {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("the registry did not answer on %s: %v\n%s", backend, err, b)
	}
	u, _ := url.Parse(backend)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, _, ok := req.BasicAuth(); ok {
			r.mu.Lock()
			r.users[user]++
			r.mu.Unlock()
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Addr = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Users returns the user names the registry was asked to authenticate.
func (r *oauthRegistry) Users() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for u := range r.users {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// push pushes local image into the registry as <Addr>/taoflow/trainer:test
// and removes that tag locally, so that a pull must reach the registry.
func (r *oauthRegistry) push(t *testing.T, image string) string {
	t.Helper()
	cfg := []string{"DOCKER_CONFIG=" + t.TempDir()}
	if _, err := testrig.DockerEnv(t, cfg, strings.NewReader(r.Password), "login", r.Addr, "-u", defaultNGCUser, "--password-stdin"); err != nil {
		t.Fatal(err)
	}
	ref := r.Addr + "/taoflow/trainer:test"
	if _, err := testrig.Docker(t, "tag", image, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := testrig.DockerEnv(t, cfg, nil, "push", ref); err != nil {
		t.Fatal(err)
	}
	if _, err := testrig.Docker(t, "rmi", ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testrig.Docker(t, "rmi", ref) }) // the pull's tag
	return ref
}

// hookPlatform calls before ahead of each Exec, with the script.
type hookPlatform struct {
	platform.Platform
	before func(script string)
}

func (h *hookPlatform) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	if h.before != nil {
		h.before(script)
	}
	return h.Platform.Exec(ctx, inst, script, stdin)
}

// isPoll reports whether script is a container status poll.
func isPoll(script string) bool { return strings.Contains(script, "@inspect") }

// sampleCmdlines reads every /proc/*/cmdline over and over until the
// returned stop is called, which returns the command lines that held one
// of values.
func sampleCmdlines(values ...string) (stop func() []string) {
	quit := make(chan struct{})
	var hits []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			for _, p := range testrig.Processes(func(p testrig.Proc) bool {
				for _, v := range values {
					if bytes.Contains(p.Argv, []byte(v)) {
						return true
					}
				}
				return false
			}) {
				hits = append(hits, p.Cmdline())
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() []string {
		close(quit)
		<-done
		return hits
	}
}

// dockerShim puts a docker wrapper first in PATH that logs the arguments
// of every call, a line each, and runs the real docker; shadow adds more
// programs to the same directory (name → shell script body). It returns
// the calls logged so far.
func dockerShim(t testing.TB, shadow map[string]string) (calls func() []string) {
	t.Helper()
	real, err := exec.LookPath("docker")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	logFile := filepath.Join(bin, "calls")
	progs := map[string]string{"docker": fmt.Sprintf("printf '%%s\\n' \"$*\" >> %s\nexec %s \"$@\"", logFile, real)}
	for name, body := range shadow {
		progs[name] = body
	}
	for name, body := range progs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() []string {
		b, _ := os.ReadFile(logFile)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
}

// inspectPolls counts the wait's polls among the docker calls.
func inspectPolls(calls []string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, "inspect --type container --format @inspect") {
			n++
		}
	}
	return n
}

// openGateAfter copies a file to /gate in container id (a trainer started
// with -wait-for /gate trains only then) once ready reports true, so a test
// makes the polls it counts happen while the job runs, whatever the
// machine's load. The returned channel closes when the gate is open; after
// a minute it opens anyway, and the test fails.
func openGateAfter(t *testing.T, id string, ready func() bool) <-chan struct{} {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(gate, []byte("open\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !testrig.Within(time.Minute, ready) {
			t.Errorf("the gate of %s opened after a minute without the condition", id)
		}
		if out, err := exec.Command("docker", "cp", gate, id+":/gate").CombinedOutput(); err != nil {
			t.Errorf("docker cp gate: %v: %s", err, out)
		}
	}()
	return done
}

// logReads counts a job's docker logs calls: whole reads, and follows.
func logReads(calls []string, id string) (whole, follow int) {
	for _, c := range calls {
		switch c {
		case "logs " + id:
			whole++
		case "logs -f " + id:
			follow++
		}
	}
	return whole, follow
}
