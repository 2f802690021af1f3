package brevtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// fakePackage is the import path of the fake brev binary.
const fakePackage = "github.com/taoflow/taoflow/platform/brev/brevtest/fakebrev"

// binPrefix names the per-process build directories in the temp dir:
// binPrefix<pid>-<random>.
const binPrefix = "taoflow-fakebrev-"

// Options configure a fake brev.
type Options struct {
	// Version is what `brev --version` reports (default "v0.6.327").
	Version string
	// ArrayJSON makes `ls --json` print the pre-v0.6.323 bare array
	// (literal null when empty) instead of {"workspaces": [...]}.
	ArrayJSON bool
	// DeployPolls is how many ls ticks a new instance stays DEPLOYING
	// (default 1): the first DeployPolls ls calls after create still show
	// it DEPLOYING, the next one RUNNING (or FAILURE, by a fault). Every
	// `ls` is one tick for every instance; create and start without
	// --detached tick their own instances while they wait. STOPPING and
	// STARTING last one tick.
	DeployPolls int
	// DeleteTicks is how many ls ticks a deleted instance stays DELETING
	// before it is gone (default 1). Its name stays taken until then.
	DeleteTicks int
	// SSH is the sshd that refresh's aliases reach; nil: refresh writes no
	// Host entries.
	SSH *sshtest.Server
	// RefreshDelay is how long a refresh takes (default 100ms; negative:
	// none). Overlapping refreshes are what Call.Concurrent records, and a
	// realistic duration makes an unserialised client overlap.
	RefreshDelay time.Duration
	// ControlMaster makes refresh's host entries multiplex as the real
	// ones do (ControlMaster auto, ControlPersist 10m): the first brev exec
	// to an instance leaves a master ssh running for ten minutes. Its
	// sockets go to Fake.ControlDir; the rig kills what is left there when
	// the test ends (Masters tells the test first).
	ControlMaster bool
	// LoggedOut starts the fake logged out (see SetLoggedOut).
	LoggedOut bool
	// Banner is printed on stdout before every command's output, as brev
	// prints its "new version" banner with BREV_FEATURE_SHOW_VERSION_ON_RUN.
	Banner string
	// OnboardingPrompt makes --version print the version and then fail in
	// an onboarding prompt, as brev v0.6.317 does.
	OnboardingPrompt bool
	// APIKey logs the fake in with an API key (`brev login --api-key …
	// --org-id …`): ~/.brev/credentials.json names the key's org, as the
	// real one writes it. Without it, the file holds a user's tokens.
	// (Either way, ls lists other users' instances too, as an API key's
	// does or as instances shared with the user are.)
	APIKey bool
	// OutOfCapacity lists instance types that create skips as "currently
	// unavailable (no capacity)" (the catalogue already marks
	// gpu_1x_h100_pcie so), as when a cloud runs out of a GPU.
	OutOfCapacity []string
	// ExtraOffers are JSON objects (`{"type": "a,b", "price_per_hour":
	// -1}`) that search --json lists first, whatever its filters: the
	// entries of a hostile or broken brev.
	ExtraOffers []string
}

// Fake is one fake brev: its binary, the HOME it works in and its state.
type Fake struct {
	// Binary is the absolute path of the fake brev, named "brev" in a
	// directory of its own, so a PATH prefix finds it.
	Binary string
	// Home is HOME for brev and ssh: ~/.brev and ~/.ssh/config live here.
	Home string
	// Dir is the fake's state directory (TF_FAKEBREV).
	Dir string
	// ControlDir holds the sockets of brev's own ssh masters, with
	// Options.ControlMaster; "" without.
	ControlDir string

	t testing.TB
}

var build struct {
	once sync.Once
	bin  string
	err  error
}

// Start builds the fake brev (once per test process) and gives the test a
// fresh one: new Home and state Dir, no instances. It fails the test when
// the build fails. The instances left at the end are not deleted: tests
// check leftovers themselves (CheckNoneAlive).
func Start(t testing.TB, opts Options) *Fake {
	t.Helper()
	build.once.Do(func() { build.bin, build.err = buildFake() })
	if build.err != nil {
		t.Fatalf("brevtest: %v", build.err)
	}
	root := t.TempDir()
	f := &Fake{
		Binary: build.bin,
		Home:   filepath.Join(root, "home"),
		Dir:    filepath.Join(root, "state"),
		t:      t,
	}
	for _, d := range []string{f.Home, f.Dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("brevtest: %v", err)
		}
	}
	o := fakestate.Options{
		Version:          opts.Version,
		ArrayJSON:        opts.ArrayJSON,
		DeployPolls:      opts.DeployPolls,
		DeleteTicks:      opts.DeleteTicks,
		LoggedOut:        opts.LoggedOut,
		Banner:           opts.Banner,
		OnboardingPrompt: opts.OnboardingPrompt,
		OutOfCapacity:    opts.OutOfCapacity,
	}
	for _, x := range opts.ExtraOffers {
		o.ExtraOffers = append(o.ExtraOffers, json.RawMessage(x))
	}
	if opts.ControlMaster {
		// Short: a socket path must fit in 108 bytes, with ssh's suffix.
		d, err := os.MkdirTemp("", "tfb")
		if err != nil {
			t.Fatalf("brevtest: %v", err)
		}
		f.ControlDir, o.ControlDir = d, d
		t.Cleanup(func() {
			for _, p := range f.Masters() {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			os.RemoveAll(d)
		})
	}
	switch {
	case opts.RefreshDelay < 0:
		o.RefreshDelayMS = -1
	case opts.RefreshDelay > 0:
		o.RefreshDelayMS = max(1, int(opts.RefreshDelay/time.Millisecond))
	}
	if opts.SSH != nil {
		o.SSH = &fakestate.SSH{Port: opts.SSH.Port, User: opts.SSH.User, KeyFile: opts.SSH.KeyFile}
	}
	f.update(func(s *fakestate.State) error {
		s.Options = o
		return nil
	})
	creds := `{"access_token":"fake-access-token","refresh_token":"fake-refresh-token"}`
	if opts.APIKey {
		creds = `{"access_token":"","refresh_token":"","api_key":"bak-fake0000000000000000","api_key_org_id":"` + fakestate.OrgID + `"}`
	}
	if err := os.MkdirAll(filepath.Join(f.Home, ".brev"), 0o700); err != nil {
		t.Fatalf("brevtest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.Home, ".brev", "credentials.json"), []byte(creds+"\n"), 0o600); err != nil {
		t.Fatalf("brevtest: %v", err)
	}
	return f
}

// buildFake builds the fake into a new temporary directory of this
// process, first removing those that processes now gone left behind (a
// test binary has no hook at exit to remove its own).
func buildFake() (string, error) {
	sweepBuilds()
	dir, err := os.MkdirTemp("", binPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("make a build directory for the fake brev: %w", err)
	}
	bin := filepath.Join(dir, "bin", "brev")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(goTool, "build", "-o", bin, fakePackage)
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w\n%s", fakePackage, err, out)
	}
	return bin, nil
}

// sweepBuilds removes the build directories of test processes that have
// exited.
func sweepBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binPrefix+"*"))
	for _, d := range dirs {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), binPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// Env returns the environment to run the fake brev (and ssh through its
// aliases) with: this process's environment with HOME=Home,
// TF_FAKEBREV=Dir, the fake's directory first on PATH and
// BREV_NO_ANALYTICS=1. The four come last, so they win when the slice is
// appended to another environment too.
func (f *Fake) Env() []string {
	set := map[string]string{
		"HOME":              f.Home,
		fakestate.EnvDir:    f.Dir,
		"PATH":              filepath.Dir(f.Binary) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"BREV_NO_ANALYTICS": "1",
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"HOME", fakestate.EnvDir, "PATH", "BREV_NO_ANALYTICS"} {
		env = append(env, k+"="+set[k])
	}
	return env
}

// Call is one invocation of the fake brev.
type Call struct {
	// Command is the subcommand ("ls" also for "list"; "version" for
	// --version; "" when none was recognised).
	Command string
	// Args are the arguments after "brev".
	Args []string
	// Names are the instance names the call acted on: arguments plus
	// stdin lines for exec/delete/stop/start, the names being made for
	// create.
	Names []string
	// StdinPiped: stdin was not a char device, so brev read it (to EOF).
	StdinPiped bool
	// Concurrent: a refresh this call made (refresh, or exec's recovery)
	// began while another refresh was in progress.
	Concurrent bool
	// Refreshed: the call rewrote ~/.brev/ssh_config.
	Refreshed bool
	// Runs counts exec's ssh runs of the remote command (a replay makes
	// two; connection probes are not counted).
	Runs int
	// Env is the environment the call was started with.
	Env []string
	// ExitCode is 0 or 1.
	ExitCode int
	// Start and End bound the invocation.
	Start, End time.Time
}

// Calls returns every invocation so far, in start order. A call is logged
// when it ends: those still running, or killed, are not included.
func (f *Fake) Calls() []Call {
	f.t.Helper()
	raw, err := fakestate.ReadCalls(f.Dir)
	if err != nil {
		f.t.Fatalf("brevtest: %v", err)
	}
	calls := make([]Call, len(raw))
	for n, c := range raw {
		calls[n] = Call{
			Command:    c.Command,
			Args:       c.Args,
			Names:      c.Names,
			StdinPiped: c.StdinPiped,
			Concurrent: c.Concurrent,
			Refreshed:  c.Refreshed,
			Runs:       c.Runs,
			ExitCode:   c.ExitCode,
			Env:        c.Env,
			Start:      time.Unix(0, c.Start),
			End:        time.Unix(0, c.End),
		}
	}
	return calls
}

// CallsOf returns the calls of command, and of that command naming name
// when name is not empty.
func (f *Fake) CallsOf(command, name string) []Call {
	f.t.Helper()
	var out []Call
	for _, c := range f.Calls() {
		if c.Command == command && (name == "" || slices.Contains(c.Names, name)) {
			out = append(out, c)
		}
	}
	return out
}

// Instance is one instance of the fake cloud.
type Instance struct {
	Name, ID string
	// Status is the API status: RUNNING, DEPLOYING, STOPPING, STOPPED,
	// STARTING, DELETING or FAILURE.
	Status string
	// Type is the instance type it was created with.
	Type string
	// Sandbox is its "machine": the HOME and working directory of ssh
	// sessions through its aliases.
	Sandbox string
	// Existing marks an instance made outside taoflow (AddExisting).
	Existing bool
}

func instance(i *fakestate.Instance) Instance {
	return Instance{Name: i.Name, ID: i.ID, Status: i.Status, Type: i.Type, Sandbox: i.Sandbox, Existing: i.Existing}
}

// Instances returns the current instances, DELETING ones included, in
// creation order. Reading them is not an ls: no time passes.
func (f *Fake) Instances() []Instance {
	f.t.Helper()
	st, err := fakestate.Read(f.Dir)
	if err != nil {
		f.t.Fatalf("brevtest: %v", err)
	}
	out := make([]Instance, 0, len(st.Instances))
	for _, i := range st.Instances {
		out = append(out, instance(i))
	}
	return out
}

// Status returns the status of the named instance without an ls tick, ""
// when it is gone.
func (f *Fake) Status(name string) string {
	f.t.Helper()
	for _, i := range f.Instances() {
		if i.Name == name {
			return i.Status
		}
	}
	return ""
}

// AddExisting adds a RUNNING instance made outside taoflow (Existing:
// true), with a sandbox of its own. The name must be free.
func (f *Fake) AddExisting(name string) Instance {
	f.t.Helper()
	var added Instance
	f.update(func(s *fakestate.State) error {
		for _, i := range s.Instances {
			if i.Name == name {
				return fmt.Errorf("AddExisting(%q): an instance of that name exists (%s)", name, i.Status)
			}
		}
		sandbox := filepath.Join(f.Dir, fakestate.SandboxDir, name)
		if err := os.MkdirAll(sandbox, 0o700); err != nil {
			return err
		}
		i := &fakestate.Instance{Name: name, ID: fakestate.NewID(), Status: fakestate.Running,
			Type: "g5.xlarge", Sandbox: sandbox, Existing: true}
		s.Instances = append(s.Instances, i)
		added = instance(i)
		return nil
	})
	return added
}

// Bill is what the fake cloud billed for one instance: from the create
// that registered it until the delete that ended it.
type Bill struct {
	Name, Type string
	Start, End time.Time
}

// Bills returns the bills of the instances deleted so far, in delete order.
func (f *Fake) Bills() []Bill {
	f.t.Helper()
	st, err := fakestate.Read(f.Dir)
	if err != nil {
		f.t.Fatalf("brevtest: %v", err)
	}
	out := make([]Bill, 0, len(st.Bills))
	for _, b := range st.Bills {
		out = append(out, Bill{Name: b.Name, Type: b.Type, Start: time.Unix(0, b.Start), End: time.Unix(0, b.End)})
	}
	return out
}

// SetStatus moves the named instance to status (its tick count restarts,
// so e.g. DEPLOYING lasts DeployPolls more ticks). The name must exist.
func (f *Fake) SetStatus(name, status string) {
	f.t.Helper()
	f.update(func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return fmt.Errorf("SetStatus(%q, %q): no such instance", name, status)
		}
		i.SetStatus(status)
		return nil
	})
}

// Masters returns the pids of brev's own ssh master connections still
// running (Options.ControlMaster).
func (f *Fake) Masters() []int {
	if f.ControlDir == "" {
		return nil
	}
	return procsWith("cmdline", []byte(f.ControlDir+"/"))
}

// procsWith returns the pids of the processes whose /proc/PID/file holds
// text.
func procsWith(file string, text []byte) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/" + file)
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		// A NUL first, so that text may start with one for the first entry.
		if err != nil || !bytes.Contains(append([]byte{0}, b...), text) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// SetLoggedOut logs the fake out (every command but --version then prints
// brev's login prompt on stdout and exits 1) or back in.
func (f *Fake) SetLoggedOut(out bool) {
	f.t.Helper()
	f.update(func(s *fakestate.State) error {
		s.Options.LoggedOut = out
		return nil
	})
}

// StopBehindBack stops the named instance as a colleague's `brev stop`, a
// hung VM or a provider would, without the client knowing: it is STOPPED,
// ssh to it is refused, and the processes running in its sandbox die.
func (f *Fake) StopBehindBack(name string) {
	f.t.Helper()
	f.down(name, false)
}

// DeleteBehindBack deletes the named instance behind the client's back: it
// is gone from ls at once, ssh to it is refused, and the processes running
// in its sandbox die.
func (f *Fake) DeleteBehindBack(name string) {
	f.t.Helper()
	f.down(name, true)
}

// CutOff makes the named instance unreachable, as a network partition or
// a hung VM does: ls still shows it RUNNING, but ssh to it is refused, and
// what runs on it goes on running.
func (f *Fake) CutOff(name string) {
	f.t.Helper()
	for _, i := range f.Instances() {
		if i.Name == name {
			if err := os.WriteFile(i.Sandbox+".down", nil, 0o600); err != nil {
				f.t.Fatalf("brevtest: %v", err)
			}
			return
		}
	}
	f.t.Fatalf("brevtest: CutOff(%q): no such instance", name)
}

// Hang makes the named instance hang, as a VM thrashing on memory or a
// hung disk does: ls still shows it RUNNING, ssh connects, but every
// session started from then on never answers nor ends (sshtest.Hang).
func (f *Fake) Hang(name string) {
	f.t.Helper()
	for _, i := range f.Instances() {
		if i.Name == name {
			if err := sshtest.Hang(i.Sandbox, true); err != nil {
				f.t.Fatalf("brevtest: %v", err)
			}
			return
		}
	}
	f.t.Fatalf("brevtest: Hang(%q): no such instance", name)
}

func (f *Fake) down(name string, remove bool) {
	f.t.Helper()
	var sandbox string
	f.update(func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return fmt.Errorf("no instance %q to take down", name)
		}
		sandbox = i.Sandbox
		if remove {
			s.Remove(i)
		} else {
			i.SetStatus(fakestate.Stopped)
		}
		return nil
	})
	if sandbox == "" {
		return
	}
	if err := os.WriteFile(sandbox+".down", nil, 0o600); err != nil {
		f.t.Fatalf("brevtest: %v", err)
	}
	// The machine is off: what ran on it is gone.
	for _, pid := range procsWith("environ", []byte("\x00HOME="+sandbox+"\x00")) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// AddOthers adds a RUNNING instance of another user of the org (owner),
// as an API key's `brev ls` lists them: nothing in the listing tells it
// from the user's own.
func (f *Fake) AddOthers(name, owner string) Instance {
	f.t.Helper()
	var added Instance
	f.update(func(s *fakestate.State) error {
		if s.Find(name) != nil {
			return fmt.Errorf("AddOthers(%q): an instance of that name exists", name)
		}
		sandbox := filepath.Join(f.Dir, fakestate.SandboxDir, name)
		if err := os.MkdirAll(sandbox, 0o700); err != nil {
			return err
		}
		i := &fakestate.Instance{Name: name, ID: fakestate.NewID(), Status: fakestate.Running,
			Type: "g5.xlarge", Sandbox: sandbox, Existing: true, Owner: owner}
		s.Instances = append(s.Instances, i)
		added = instance(i)
		return nil
	})
	return added
}

// Fault is a failure for the fake to inject. Kinds:
//   - "create-eof": create registers the instance, then fails as if the
//     POST died (unexpected EOF, "Only created 0/1", exit 1): an orphan.
//   - "create-failure": the instance ends DEPLOYING in FAILURE.
//   - "stuck-deploying": the instance stays DEPLOYING forever.
//   - "exec-transient": exec fails as if ssh could not connect (exit 255
//     inside, exit 1 out) without running the command.
//   - "delete-error": delete fails with an API error, instance unchanged.
//   - "ls-error": ls fails with a network error (Name is ignored).
//   - "search-error": search fails to fetch the public catalogue (a
//     network error; Name is ignored): types go unpriced.
type Fault struct {
	// Kind is one of the kinds above.
	Kind string
	// Name limits the fault to one instance ("" = any).
	Name string
	// Times is how many times it fires; 0 means 1.
	Times int
	// Match limits an exec fault to commands that contain it ("" = any).
	Match string
}

// Inject queues faults; each fires at the next matching operations, in
// the order injected, until its Times are used up.
func (f *Fake) Inject(faults ...Fault) {
	f.t.Helper()
	for _, ft := range faults {
		known := false
		for _, k := range fakestate.Kinds {
			known = known || ft.Kind == k
		}
		if !known {
			f.t.Fatalf("brevtest: Inject: unknown fault kind %q (want one of %s)", ft.Kind, strings.Join(fakestate.Kinds, ", "))
		}
	}
	f.update(func(s *fakestate.State) error {
		for _, ft := range faults {
			s.Faults = append(s.Faults, fakestate.Fault{Kind: ft.Kind, Name: ft.Name, Times: max(ft.Times, 1), Match: ft.Match})
		}
		return nil
	})
}

// Alive returns the instances a run left behind: those not DELETING (and
// not gone), excluding Existing ones.
func (f *Fake) Alive() []Instance {
	f.t.Helper()
	var out []Instance
	for _, i := range f.Instances() {
		if i.Status != fakestate.Deleting && !i.Existing {
			out = append(out, i)
		}
	}
	return out
}

// CheckNoneAlive fails t (without stopping it) listing every instance
// Alive returns, if any.
func (f *Fake) CheckNoneAlive(t testing.TB) {
	t.Helper()
	alive := f.Alive()
	if len(alive) == 0 {
		return
	}
	list := make([]string, len(alive))
	for n, i := range alive {
		list[n] = fmt.Sprintf("%s (%s)", i.Name, i.Status)
	}
	t.Errorf("brevtest: %d instance(s) left alive: %s", len(alive), strings.Join(list, ", "))
}

func (f *Fake) update(fn func(*fakestate.State) error) {
	f.t.Helper()
	if err := fakestate.Update(f.Dir, fn); err != nil {
		f.t.Fatalf("brevtest: %v", err)
	}
}
