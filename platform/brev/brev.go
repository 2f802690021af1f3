package brev

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/secret"
)

// MinVersion is the oldest brev CLI taoflow works with: the first whose
// exec multiplexes ssh, and the oldest whose quirks the package knows.
const MinVersion = "v0.6.320"

// Transports: how Exec reaches an instance.
const (
	// TransportSSH runs commands with OpenSSH through the alias that
	// `brev refresh` writes: real exit codes, stdin, multiplexing.
	TransportSSH = "ssh"
	// TransportExec runs commands with `brev exec`: no stdin, and the exit
	// code travels back in-band.
	TransportExec = "exec"
)

// Config says how to reach Brev. The zero value of every field means its
// default.
type Config struct {
	// Binary is the brev CLI. Default "brev", looked up on the PATH of Env.
	Binary string
	// Run is the run id; it names the ssh control directory.
	Run string
	// Transport is TransportSSH (the default) or TransportExec.
	Transport string
	// Env is the environment of brev (and of the ssh it starts for brev
	// exec). nil means os.Environ().
	Env []string
	// Redactor redacts the plan's secrets from what brev printed before an
	// error quotes it, clipped (brev exec's stderr is the remote
	// command's). nil redacts nothing.
	Redactor *secret.Redactor
	// Home is where brev keeps ~/.brev and ~/.ssh/config; brev is run with
	// HOME set to it. Default: HOME of Env.
	Home string
	// SSH configures the ssh transport. Its ConfigFile defaults to
	// Home/.ssh/config, where `brev refresh` adds the Include of its host
	// entries (OpenSSH on its own would read the passwd home's, not
	// $HOME's). Its Run defaults to Run.
	SSH ssh.Config
	// CreateTimeout bounds Create from `brev create` to a RUNNING instance
	// that answers the probe. Default 20m.
	CreateTimeout time.Duration
	// DeleteTimeout bounds the wait, after `brev delete`, for the instance
	// to be DELETING or gone (and after `brev stop`, STOPPING or STOPPED).
	// Default 12m.
	DeleteTimeout time.Duration
	// PollInterval is the pause between two `brev ls --json`. Default 5s.
	PollInterval time.Duration
	// CallTimeout bounds one lifecycle command (ls, create, delete, stop,
	// refresh, --version) and one readiness probe. Default 2m.
	CallTimeout time.Duration
	// Ledger is the file Create records the name of every instance it
	// makes in, before it makes it (see LedgerFile, the default); `taoflow
	// reap` deletes only what it finds there.
	Ledger string
	// Progress, when set, is told what Create is waiting for, e.g.
	// ("gpu", "DEPLOYING (1m10s)"), for a live view. It must not block.
	Progress func(instance, msg string)
}

// Brev is the brev platform. Its zero value is not usable; call New. It is
// safe for concurrent use.
type Brev struct {
	cfg       Config
	env       []string
	maxOutput int // cap of each captured stream of Exec; tests lower it

	sshCfg ssh.Config // for TransportSSH, with its defaults filled in
	sshMu  sync.Mutex
	ssh    *ssh.SSH // made by the first Exec (see transport)
	// execUsed are the aliases brev exec reached (TransportExec): their
	// masters are asked to exit by closeMaster or Close.
	execUsed map[string]bool

	checkMu sync.Mutex
	bin     string // absolute path of the brev CLI, once Check succeeded
	version string

	refreshSem chan struct{} // one `brev refresh` at a time
	closed     atomic.Bool
	ledger     string // where Create records the names it creates
}

var (
	_ platform.Platform = (*Brev)(nil)
	_ platform.Creator  = (*Brev)(nil)
	_ platform.Deleter  = (*Brev)(nil)
	_ platform.Stopper  = (*Brev)(nil)
	_ platform.Lister   = (*Brev)(nil)
	_ platform.Closer   = (*Brev)(nil)
	_ platform.Namer    = (*Brev)(nil)
	_ platform.Checker  = (*Brev)(nil)
	_ platform.Adopter  = (*Brev)(nil)
	_ platform.Finder   = (*Brev)(nil)

	_ platform.DeleteBounder = (*Brev)(nil)
)

// maxExecOutput is the most bytes of each of stdout and stderr that Exec
// keeps with TransportExec (as platform/ssh keeps with TransportSSH);
// beyond it the tail is kept behind a marker line.
const maxExecOutput = ssh.MaxOutput

// New returns the brev platform configured by cfg. It checks cfg and
// starts nothing: the first lifecycle call checks the brev CLI (Check).
func New(cfg Config) (*Brev, error) {
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportSSH
	case TransportSSH, TransportExec:
	default:
		return nil, fmt.Errorf("brev: transport %q is not %q or %q", cfg.Transport, TransportSSH, TransportExec)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"create timeout", &cfg.CreateTimeout, 20 * time.Minute},
		{"delete timeout", &cfg.DeleteTimeout, 12 * time.Minute},
		{"poll interval", &cfg.PollInterval, 5 * time.Second},
		{"call timeout", &cfg.CallTimeout, 2 * time.Minute},
	} {
		switch {
		case *d.v < 0:
			return nil, fmt.Errorf("brev: the %s is negative (%v)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if cfg.Binary == "" {
		cfg.Binary = "brev"
	}
	base := cfg.Env
	if base == nil {
		base = os.Environ()
	}
	if cfg.Home == "" {
		cfg.Home = getenv(base, "HOME")
	}
	if cfg.Home != "" && !filepath.IsAbs(cfg.Home) {
		return nil, fmt.Errorf("brev: home %q is not an absolute path", cfg.Home)
	}
	b := &Brev{cfg: cfg, env: environ(base, cfg.Home), maxOutput: maxExecOutput, refreshSem: make(chan struct{}, 1)}
	b.ledger = cfg.Ledger
	if b.ledger == "" {
		b.ledger = LedgerFile(base)
	}
	if cfg.Transport == TransportSSH {
		sc := cfg.SSH
		if sc.ConfigFile == "" {
			if cfg.Home == "" {
				return nil, errors.New("brev: cannot tell where brev writes its ssh config: HOME is not set; set it, or the ssh config file")
			}
			sc.ConfigFile = filepath.Join(cfg.Home, ".ssh", "config")
		}
		if sc.Run == "" {
			sc.Run = cfg.Run
		}
		b.sshCfg = sc
	}
	return b, nil
}

// environ is brev's environment: base, with HOME set to home, analytics
// off, and without the flag that prints a banner into JSON output. When
// SSH_AUTH_SOCK is unset, brev exec starts an ssh-agent for every call and
// never stops it; brev's host entries name the key file and need no agent,
// so it is set to a path where no agent listens, and none is started.
func environ(base []string, home string) []string {
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "BREV_FEATURE_SHOW_VERSION_ON_RUN":
			continue
		}
		env = append(env, kv)
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	if getenv(env, "BREV_NO_ANALYTICS") == "" {
		env = append(env, "BREV_NO_ANALYTICS=1")
	}
	if getenv(env, "SSH_AUTH_SOCK") == "" {
		env = append(env, "SSH_AUTH_SOCK=/dev/null")
	}
	return env
}

// getenv returns the value of key in env: the last one, as exec.Cmd does.
func getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// binaryVersion finds the brev CLI and asks its version (`brev --version
// --no-check-latest`, which does not query GitHub): the binary and its
// version, or why it cannot be used (not found, older than MinVersion,
// logged out). Check and search both start with it.
func (b *Brev) binaryVersion(ctx context.Context) (bin, v string, err error) {
	bin, err = lookPath(b.cfg.Binary, getenv(b.env, "PATH"))
	if err != nil {
		return "", "", err
	}
	out, err := b.callWith(ctx, bin, "--version", "--no-check-latest")
	if err != nil {
		var ce *callError
		if errors.As(err, &ce) {
			// brev v0.6.317 prints its version, then fails in its
			// onboarding prompt: too old is what to say.
			if _, verr := checkVersion(ce.stdout); verr != nil && strings.Contains(verr.Error(), "too old") {
				return "", "", fmt.Errorf("brev CLI %s: %w", bin, verr)
			}
			if loggedOut(err) {
				return "", "", fmt.Errorf("brev CLI %s: %w", bin, ErrNotLoggedIn)
			}
		}
		return "", "", fmt.Errorf("asking the version of the brev CLI (%s): %w; taoflow needs brev %s or newer", bin, err, MinVersion)
	}
	v, err = checkVersion(out)
	if err != nil {
		return "", "", fmt.Errorf("brev CLI %s: %w", bin, err)
	}
	return bin, v, nil
}

// Kind returns "brev".
func (b *Brev) Kind() string { return "brev" }

// Check finds the brev CLI, asks its version (`brev --version
// --no-check-latest`, which does not query GitHub) and makes sure that
// `brev ls --json` works and prints JSON it can read, so that nothing is
// created that taoflow could not then track. It fails unless the version
// is MinVersion or newer (naming both), with ErrNotLoggedIn when brev is
// logged out, and when ls prints anything but its JSON (a banner before
// it, say). Create, Delete, Stop, List, Find and Exec with TransportExec
// call it first; after one success it answers from memory.
func (b *Brev) Check(ctx context.Context) (string, error) {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.version != "" {
		return b.version, nil
	}
	bin, v, err := b.binaryVersion(ctx)
	if err != nil {
		return "", err
	}
	var out []byte
	// A failing ls is tried again (a network hiccup), a logged-out brev
	// is not.
	for try := 1; ; try++ {
		out, err = b.callWith(ctx, bin, "ls", "--json")
		if err == nil {
			break
		}
		if loggedOut(err) {
			return "", fmt.Errorf("brev CLI %s: %w", bin, ErrNotLoggedIn)
		}
		if ctx.Err() != nil || try == maxLsFailures {
			return "", fmt.Errorf("brev CLI %s: `brev ls --json` failed (%d tries), so taoflow could not track the instances it creates: %w", bin, try, err)
		}
		if err := sleep(ctx, b.cfg.PollInterval); err != nil {
			return "", fmt.Errorf("brev ls --json: %w", err)
		}
	}
	if _, err := ParseList(out); err != nil {
		if loggedOut(err) {
			return "", fmt.Errorf("brev CLI %s: %w", bin, ErrNotLoggedIn)
		}
		return "", fmt.Errorf("brev CLI %s: taoflow cannot read the output of `brev ls --json`, so it could not track the instances it creates (is something printed before the JSON, such as a banner? BREV_FEATURE_SHOW_VERSION_ON_RUN or a brev config.yaml can turn one on): %w", bin, err)
	}
	b.bin, b.version = bin, v
	return v, nil
}

// ErrNotLoggedIn is Check's error when brev is logged out: brev then
// prompts for a login on stdout and exits 1 on every command.
var ErrNotLoggedIn = errors.New("brev is not logged in: run `brev login`")

// loggedOut reports whether err says brev is logged out: its prompt
// ("You are currently logged out, would you like to log in? [Y/n]:") or
// the warning of an expired session.
func loggedOut(err error) bool {
	if says(err, "logged out") || says(err, "would you like to log in") {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "brev is not logged in")
}

// binary returns the brev CLI that Check found.
func (b *Brev) binary() (string, error) {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.bin == "" {
		return "", errors.New("brev: the CLI has not been checked (call Check first)")
	}
	return b.bin, nil
}

// lookPath finds file as the shell would with PATH path. A name with a
// slash is used as it is.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		abs, err := filepath.Abs(file)
		if err != nil {
			return "", fmt.Errorf("brev CLI %s: %w", file, err)
		}
		if err := executable(abs); err != nil {
			return "", fmt.Errorf("brev CLI %s: %w", file, err)
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("brev CLI %q not found on PATH (%s): install it (https://docs.nvidia.com/brev) or give its path (a plan's platform.binary)", file, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// versionRE finds "v0.6.327" in "Current Version: v0.6.327".
var versionRE = regexp.MustCompile(`\bv?(\d+)\.(\d+)\.(\d+)`)

// parseVersion reads the first x.y.z in s.
func parseVersion(s string) ([3]int, bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return [3]int{}, false
	}
	var v [3]int
	for i := range v {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return [3]int{}, false
		}
		v[i] = n
	}
	return v, true
}

// checkVersion reads the output of `brev --version` and accepts it when it
// is MinVersion or newer. It returns the version as "vX.Y.Z".
func checkVersion(out []byte) (string, error) {
	minV, _ := parseVersion(MinVersion)
	v, ok := parseVersion(string(out))
	if !ok {
		return "", fmt.Errorf("cannot read a version in the output of brev --version (%s); taoflow needs brev %s or newer", quoteStart(out), MinVersion)
	}
	found := fmt.Sprintf("v%d.%d.%d", v[0], v[1], v[2])
	for i := range v {
		if v[i] != minV[i] {
			if v[i] < minV[i] {
				return "", fmt.Errorf("brev %s is too old: taoflow needs brev %s or newer (its exec and ls --json behave differently before); upgrade the brev CLI", found, MinVersion)
			}
			break
		}
	}
	return found, nil
}

// Close closes the ssh transport: every master connection it started is
// asked to exit, and its control directory is removed. Call it after every
// other call has returned.
func (b *Brev) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.closeTransport()
}

// progress tells Config.Progress, if any.
func (b *Brev) progress(instance, msg string) {
	if b.cfg.Progress != nil {
		b.cfg.Progress(instance, msg)
	}
}

// since formats the time from start, to the second (to the millisecond
// below a second).
func since(start time.Time) string {
	d := time.Since(start)
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
