// Package fakestate is the on-disk state shared by the fake brev binary and
// the brevtest rig: the instances the fake "cloud" holds, the faults still
// to fire, the options it runs with, and the log of every invocation.
//
// Several brev processes run at once (a client creates, lists and execs in
// parallel), so every read-modify-write of state.json happens under an
// exclusive flock on a separate lock file, and every call-log line is
// appended under the same lock.
package fakestate

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// File names inside the state directory.
const (
	StateFile = "state.json"
	LockFile  = "state.lock"
	CallsFile = "calls.jsonl"
	// RefreshDir holds one marker file per refresh in progress, each
	// flocked by its refresh; see the fake's refresh.
	RefreshDir = "refreshing"
	// SandboxDir holds one directory per instance: its HOME over ssh.
	SandboxDir = "sandboxes"
)

// EnvDir is the environment variable that names the state directory.
const EnvDir = "TF_FAKEBREV"

// Instance statuses, as the Brev API spells them.
const (
	Running   = "RUNNING"
	Deploying = "DEPLOYING"
	Stopping  = "STOPPING"
	Stopped   = "STOPPED"
	Starting  = "STARTING"
	Deleting  = "DELETING"
	Failure   = "FAILURE"
)

// Fault kinds.
const (
	FaultCreateEOF      = "create-eof"
	FaultCreateFailure  = "create-failure"
	FaultStuckDeploying = "stuck-deploying"
	FaultExecTransient  = "exec-transient"
	FaultDeleteError    = "delete-error"
	FaultLsError        = "ls-error"
	FaultSearchError    = "search-error"
)

// Kinds lists every fault kind the fake knows.
var Kinds = []string{FaultCreateEOF, FaultCreateFailure, FaultStuckDeploying, FaultExecTransient, FaultDeleteError, FaultLsError, FaultSearchError}

// Fates an instance is created with, set by create faults.
const (
	FateFailure = "failure" // DEPLOYING ends in FAILURE
	FateStuck   = "stuck"   // DEPLOYING forever
)

// Defaults for zero options.
const (
	DefaultVersion        = "v0.6.327"
	DefaultDeployPolls    = 1
	DefaultDeleteTicks    = 1
	DefaultRefreshDelayMS = 100
	// Org is the fake's organisation name; OrgID its id.
	Org   = "fake-org"
	OrgID = "org-fake0000"
)

// SSH says how the fake's ssh aliases reach the test sshd: the fields of
// sshtest.Server that its HostEntry uses.
type SSH struct {
	Port    int    `json:"port"`
	User    string `json:"user"`
	KeyFile string `json:"key_file"`
}

// Options are the fake's settings; zero fields take the defaults above
// (see the Eff methods).
type Options struct {
	Version     string `json:"version,omitempty"`
	ArrayJSON   bool   `json:"array_json,omitempty"`
	DeployPolls int    `json:"deploy_polls,omitempty"`
	DeleteTicks int    `json:"delete_ticks,omitempty"`
	// RefreshDelayMS is how long a refresh takes, in milliseconds
	// (0: DefaultRefreshDelayMS; negative: none).
	RefreshDelayMS int  `json:"refresh_delay_ms,omitempty"`
	SSH            *SSH `json:"ssh,omitempty"`
	// ControlDir, when set, makes refresh's host entries multiplex as the
	// real ones do (ControlMaster auto, ControlPersist 10m), with their
	// sockets in this directory (the real ones: ~/.ssh/brev-control-%C).
	ControlDir string `json:"control_dir,omitempty"`
	// LoggedOut makes every command that needs the API print brev's login
	// prompt on stdout and fail (exit 1), as a logged-out brev does with
	// stdin /dev/null.
	LoggedOut bool `json:"logged_out,omitempty"`
	// Banner is printed on stdout before every command's output, as
	// BREV_FEATURE_SHOW_VERSION_ON_RUN does when a newer brev exists.
	Banner string `json:"banner,omitempty"`
	// OnboardingPrompt makes --version print the version and then fail in
	// an onboarding prompt (exit 1), as brev v0.6.317 does.
	OnboardingPrompt bool `json:"onboarding_prompt,omitempty"`
	// OutOfCapacity lists instance types that create skips as "currently
	// unavailable (no capacity)", besides those the catalogue marks so.
	OutOfCapacity []string `json:"out_of_capacity,omitempty"`
	// ExtraOffers are JSON objects search --json prints first, whatever
	// its filters: a hostile or broken brev's entries.
	ExtraOffers []json.RawMessage `json:"extra_offers,omitempty"`
}

// NoCapacity reports whether typ is listed in OutOfCapacity.
func (o Options) NoCapacity(typ string) bool {
	for _, t := range o.OutOfCapacity {
		if t == typ {
			return true
		}
	}
	return false
}

// EffVersion returns the version brev reports.
func (o Options) EffVersion() string {
	if o.Version == "" {
		return DefaultVersion
	}
	return o.Version
}

// EffDeployPolls returns how many ticks an instance stays DEPLOYING.
func (o Options) EffDeployPolls() int {
	if o.DeployPolls <= 0 {
		return DefaultDeployPolls
	}
	return o.DeployPolls
}

// EffDeleteTicks returns how many ticks an instance stays DELETING.
func (o Options) EffDeleteTicks() int {
	if o.DeleteTicks <= 0 {
		return DefaultDeleteTicks
	}
	return o.DeleteTicks
}

// EffRefreshDelayMS returns how long a refresh takes, in milliseconds.
func (o Options) EffRefreshDelayMS() int {
	switch {
	case o.RefreshDelayMS == 0:
		return DefaultRefreshDelayMS
	case o.RefreshDelayMS < 0:
		return 0
	}
	return o.RefreshDelayMS
}

// Instance is one workspace of the fake cloud.
type Instance struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Type   string `json:"type"`
	// Sandbox is the directory its ssh sessions run in (HOME and cwd).
	Sandbox string `json:"sandbox"`
	// Existing marks an instance made outside taoflow (by the rig).
	Existing bool `json:"existing,omitempty"`
	// Ticks counts the ls ticks spent in the current status.
	Ticks int `json:"ticks"`
	// Fate is how DEPLOYING ends: "" (RUNNING), FateFailure or FateStuck.
	Fate string `json:"fate,omitempty"`
	// Orphan marks an instance whose create POST "failed": its build status
	// stays empty forever (brev-cli #378).
	Orphan bool `json:"orphan,omitempty"`
	// Owner is the user who made it; "" is the logged-in user. ls shows
	// others' instances (an API key lists the whole org), but not who
	// owns them, as the real one.
	Owner string `json:"owner,omitempty"`
	// CreatedAt is when create registered it (unix nanoseconds): the
	// fake cloud bills from then until brev delete.
	CreatedAt int64 `json:"created_at,omitempty"`
}

// Bill is what the fake cloud billed for one instance: from its create
// until its delete (unix nanoseconds).
type Bill struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// SetStatus moves the instance to status and restarts its tick count.
func (i *Instance) SetStatus(status string) {
	i.Status = status
	i.Ticks = 0
}

// PowerOn is the machine of a stopped instance booting again (a start, or
// brev exec starting it): ssh to it is no longer refused.
func (i *Instance) PowerOn() {
	if i.Sandbox != "" {
		_ = os.Remove(i.Sandbox + ".down")
	}
}

// Fault is a failure still to be injected. Times is how many more times it
// fires; Name limits it to one instance ("" = any).
type Fault struct {
	Kind  string `json:"kind"`
	Name  string `json:"name,omitempty"`
	Times int    `json:"times"`
	// Match, for exec faults, limits the fault to commands containing it.
	Match string `json:"match,omitempty"`
}

// State is the whole of state.json.
type State struct {
	Options   Options     `json:"options"`
	Instances []*Instance `json:"instances"`
	Faults    []Fault     `json:"faults"`
	Bills     []Bill      `json:"bills,omitempty"`
}

// Find returns the instance whose name or id is exactly ref, or nil.
func (s *State) Find(ref string) *Instance {
	for _, i := range s.Instances {
		if i.Name == ref {
			return i
		}
	}
	for _, i := range s.Instances {
		if i.ID == ref {
			return i
		}
	}
	return nil
}

// Remove drops the instance from the state.
func (s *State) Remove(gone *Instance) {
	out := s.Instances[:0]
	for _, i := range s.Instances {
		if i != gone {
			out = append(out, i)
		}
	}
	s.Instances = out
}

// TakeFault consumes one firing of the first fault of kind that applies to
// name and reports whether there was one. A fault with an empty Name
// applies to every name; an empty name (ls, which names no instance) takes
// any fault of the kind.
func (s *State) TakeFault(kind, name string) bool {
	return s.TakeFaultFor(kind, name, "")
}

// TakeFaultFor is TakeFault for an operation on text (an exec's command):
// a fault with a Match applies only when text contains it.
func (s *State) TakeFaultFor(kind, name, text string) bool {
	for n, f := range s.Faults {
		if f.Kind != kind || (f.Name != "" && name != "" && f.Name != name) {
			continue
		}
		if f.Match != "" && !strings.Contains(text, f.Match) {
			continue
		}
		if f.Times <= 1 {
			s.Faults = append(s.Faults[:n], s.Faults[n+1:]...)
		} else {
			s.Faults[n].Times--
		}
		return true
	}
	return false
}

// Tick advances the instances that match (all when match is nil) by one ls
// poll: DEPLOYING ends after DeployPolls ticks (in RUNNING, or FAILURE, or
// never, by the instance's Fate), DELETING ends after DeleteTicks (the
// instance is gone), STOPPING and STARTING after one.
func (s *State) Tick(match func(*Instance) bool) {
	var gone []*Instance
	for _, i := range s.Instances {
		if match != nil && !match(i) {
			continue
		}
		i.Ticks++
		switch i.Status {
		case Deploying:
			if i.Fate == FateStuck || i.Ticks <= s.Options.EffDeployPolls() {
				continue
			}
			if i.Fate == FateFailure {
				i.SetStatus(Failure)
			} else {
				i.SetStatus(Running)
			}
		case Deleting:
			if i.Ticks > s.Options.EffDeleteTicks() {
				gone = append(gone, i)
			}
		case Stopping:
			if i.Ticks > 1 {
				i.SetStatus(Stopped)
			}
		case Starting:
			if i.Ticks > 1 {
				i.SetStatus(Running)
				i.PowerOn()
			}
		}
	}
	for _, i := range gone {
		s.Remove(i)
	}
}

// NewID returns a random instance id shaped like Brev's ("hclv1344v").
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("fakestate: crypto/rand: %v", err))
	}
	for n := range b {
		b[n] = alphabet[int(b[n])%len(alphabet)]
	}
	b[0] = alphabet[int(b[0])%26] // ids start with a letter
	return string(b)
}

// lock takes the exclusive state lock and returns its release.
func lock(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open fake brev lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock fake brev state: %w", err)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}

func read(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return &State{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read fake brev state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse fake brev state %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

func write(dir string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write fake brev state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("write fake brev state: %w", err)
	}
	return nil
}

// Read returns a snapshot of the state.
func Read(dir string) (*State, error) {
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return read(dir)
}

// Update runs fn on the state under the lock and saves what it leaves,
// unless fn fails: then nothing is saved and its error is returned.
func Update(dir string, fn func(*State) error) error {
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := read(dir)
	if err != nil {
		return err
	}
	if err := fn(s); err != nil {
		return err
	}
	return write(dir, s)
}

// Call is one line of calls.jsonl: one invocation of the fake.
type Call struct {
	// Command is the subcommand's canonical name ("ls" for "list"),
	// "version" for --version, "" when none was recognised.
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Names are the instance names the call acted on: arguments and stdin
	// lines for exec/delete/stop/start, the names being created for create.
	Names      []string `json:"names,omitempty"`
	StdinPiped bool     `json:"stdin_piped"`
	// Concurrent: a refresh this call made began while another was running.
	Concurrent bool `json:"concurrent,omitempty"`
	// Refreshed: the call rewrote ~/.brev/ssh_config.
	Refreshed bool `json:"refreshed,omitempty"`
	// Runs counts how many times exec started the remote command.
	Runs     int `json:"runs,omitempty"`
	ExitCode int `json:"exit_code"`
	// Env is the environment brev was started with (tests look for
	// secrets in it: a process-table sampler can miss a short call).
	Env   []string `json:"env,omitempty"`
	Start int64    `json:"start_unix_nano"`
	End   int64    `json:"end_unix_nano"`
}

// AppendCall adds c to the call log under the lock.
func AppendCall(dir string, c Call) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(filepath.Join(dir, CallsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open fake brev call log: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append to fake brev call log: %w", err)
	}
	return f.Close()
}

// ReadCalls returns the call log in start order.
func ReadCalls(dir string) ([]Call, error) {
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, err := os.ReadFile(filepath.Join(dir, CallsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read fake brev call log: %w", err)
	}
	var calls []Call
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("parse fake brev call log line %q: %w", sc.Text(), err)
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read fake brev call log: %w", err)
	}
	sort.SliceStable(calls, func(a, b int) bool { return calls[a].Start < calls[b].Start })
	return calls, nil
}
