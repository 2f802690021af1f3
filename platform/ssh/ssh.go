package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// Config says how SSH reaches instances. The zero value of every field
// means its default.
type Config struct {
	// Run is the run id; the default control directory's name is derived
	// from it, so a person can tell whose sockets they are.
	Run string
	// ControlDir is the directory for the masters' sockets; it must be
	// private (0700), and is made so when missing. Default: a new
	// /tmp/tf-<hash of Run>-<random>, removed by Close. A unix socket path
	// is limited to about 104 bytes and ssh adds 58 to this path, so it
	// must be short; Exec refuses a longer one.
	ControlDir string
	// ConfigFile is passed to ssh as -F (then ~/.ssh/config and
	// /etc/ssh/ssh_config are not read).
	ConfigFile string
	// ConnectTimeout bounds the TCP connect and the ssh handshake.
	// Default 10s.
	ConnectTimeout time.Duration
	// MaxSessions caps the commands running at once on one instance, all
	// sharing its master connection. sshd's own MaxSessions defaults to 10;
	// the default, 8, leaves room for the command that kills a cancelled one.
	MaxSessions int
	// ControlPersist is how long an idle master connection stays up.
	// Default 60s.
	ControlPersist time.Duration
	// NoMultiplex makes every command open a fresh connection, with its own
	// handshake (for benchmarks, or servers that refuse multiplexing).
	NoMultiplex bool
	// Binary is the ssh client to run. Default "ssh".
	Binary string
	// ExtraOptions are more ssh arguments, put before the destination, e.g.
	// []string{"-o", "ProxyJump=bastion"}. They cannot override the
	// options Exec sets itself (ssh keeps the first value of an option).
	ExtraOptions []string
}

// SSH is the ssh platform. Its zero value is not usable; call New. It is
// safe for concurrent use.
type SSH struct {
	cfg Config
	// maxOutput caps each captured stream; tests lower it.
	maxOutput int

	mu      sync.Mutex
	dir     string // control directory, "" until the first Exec needs it
	madeDir bool   // the directory is ours to remove
	hosts   map[string]*host
	closed  bool
}

var (
	_ platform.Platform = (*SSH)(nil)
	_ platform.Closer   = (*SSH)(nil)
)

// MaxOutput is the most bytes of each of stdout and stderr that Exec keeps.
// Beyond it the tail is kept and a marker line says how much was dropped.
const MaxOutput = 16 << 20

// maxSocketPath is the longest unix socket path accepted everywhere
// (sun_path is 104 bytes on the BSDs and macOS, 108 on Linux, both counting
// the terminating NUL).
const maxSocketPath = 103

// socketSuffix is what ssh adds to the control directory: "/" and %C (40
// hex digits), and while it creates the socket "." and 16 more hex digits.
const socketSuffix = 1 + 40 + 1 + 16

// New returns the ssh platform configured by cfg. It starts nothing and
// touches no file: the first Exec does.
func New(cfg Config) *SSH {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 8
	}
	if cfg.ControlPersist <= 0 {
		cfg.ControlPersist = 60 * time.Second
	}
	if cfg.Binary == "" {
		cfg.Binary = "ssh"
	}
	cfg.ExtraOptions = append([]string(nil), cfg.ExtraOptions...)
	return &SSH{cfg: cfg, maxOutput: MaxOutput, hosts: map[string]*host{}}
}

// Kind returns "ssh".
func (s *SSH) Kind() string { return "ssh" }

// host is what SSH keeps per instance Ref.
type host struct {
	dest dest
	sem  chan struct{} // one token per running command

	connect sync.Mutex   // held while the master is checked or started
	fresh   atomic.Int64 // unix nanos until which the master is known up
	used    atomic.Bool  // a master may exist: Close must ask it to exit

	killMu  sync.Mutex // one kill command at a time
	pendMu  sync.Mutex
	pending []killTarget // cancelled commands waiting for a kill command
}

// host returns the state for ref, parsing it on first use.
func (s *SSH) host(ref string) (*host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the ssh platform is closed")
	}
	if h, ok := s.hosts[ref]; ok {
		return h, nil
	}
	d, err := parseDest(ref)
	if err != nil {
		return nil, err
	}
	if !s.cfg.NoMultiplex {
		if err := s.ensureDir(); err != nil {
			return nil, err
		}
	}
	h := &host{dest: d, sem: make(chan struct{}, s.cfg.MaxSessions)}
	s.hosts[ref] = h
	return h, nil
}

// ensureDir makes the control directory. s.mu is held.
func (s *SSH) ensureDir() error {
	if s.dir != "" {
		return nil
	}
	if dir := s.cfg.ControlDir; dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("ssh control directory: %w", err)
		}
		if err := checkControlDir(abs); err != nil {
			return err
		}
		_, statErr := os.Lstat(abs)
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return fmt.Errorf("ssh control directory: %w", err)
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			return fmt.Errorf("ssh control directory: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("ssh control directory %s is not a directory", abs)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("ssh control directory %s has mode %v; it must be private (0700)", abs, fi.Mode().Perm())
		}
		s.dir, s.madeDir = abs, errors.Is(statErr, os.ErrNotExist)
		return nil
	}
	sum := sha256.Sum256([]byte(s.cfg.Run))
	dir, err := os.MkdirTemp("/tmp", "tf-"+hex.EncodeToString(sum[:3])+"-")
	if err != nil {
		return fmt.Errorf("ssh control directory: %w", err)
	}
	if err := checkControlDir(dir); err != nil {
		_ = os.Remove(dir)
		return err
	}
	s.dir, s.madeDir = dir, true
	return nil
}

// checkControlDir refuses a directory whose sockets would not fit a unix
// socket path, or that ssh would read as more than one word.
func checkControlDir(dir string) error {
	if n := len(dir) + socketSuffix; n > maxSocketPath {
		return fmt.Errorf("ssh ControlPath socket path is too long: %s plus ssh's %d-byte socket name is %d bytes, and a unix socket path holds at most %d; set a shorter control directory",
			dir, socketSuffix, n, maxSocketPath)
	}
	if strings.ContainsAny(dir, " \t\n\"'\\") {
		return fmt.Errorf("ssh control directory %q holds a space, quote or backslash", dir)
	}
	return nil
}

// baseArgs are the ssh options of every command to h, up to the
// destination.
func (s *SSH) baseArgs(h *host) []string {
	var a []string
	if s.cfg.ConfigFile != "" {
		a = append(a, "-F", s.cfg.ConfigFile)
	}
	a = append(a,
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout="+strconv.Itoa(seconds(s.cfg.ConnectTimeout)),
		"-o", "ServerAliveInterval=15",
		"-o", "ServerAliveCountMax=3",
		"-o", "LogLevel=ERROR",
	)
	if s.cfg.NoMultiplex {
		a = append(a, "-o", "ControlMaster=no", "-o", "ControlPath=none")
	} else {
		a = append(a,
			"-o", "ControlMaster=auto",
			"-o", "ControlPath="+strings.ReplaceAll(s.dir, "%", "%%")+"/%C",
			"-o", "ControlPersist="+strconv.Itoa(seconds(s.cfg.ControlPersist)),
		)
	}
	a = append(a, s.cfg.ExtraOptions...)
	return append(a, h.dest.args()...)
}

func seconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// command returns an ssh command to h with the options extra, running
// remote (none when empty: "-O check", "-f -N"). When ctx is done, its
// whole process group is killed.
func (s *SSH) command(ctx context.Context, h *host, extra []string, remote string) *exec.Cmd {
	args := s.baseArgs(h)
	args = append(args, extra...)
	args = append(args, "--", h.dest.host)
	if remote != "" {
		args = append(args, remote)
	}
	cmd := exec.CommandContext(ctx, s.cfg.Binary, args...)
	cmd.Env = environ()
	platform.InGroup(cmd, waitDelay)
	return cmd
}

// environ is the whole environment of the ssh client: what it needs to
// find its keys and agent, and nothing else of taoflow's environment, which
// holds secret values (a ProxyCommand, or a SendEnv in a user's config,
// would see or send it).
func environ() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	env := []string{"PATH=" + path}
	for _, name := range []string{"HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "KRB5CCNAME"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// connect makes sure h's master connection is up before a command uses it,
// so that concurrent first commands share one handshake instead of racing
// to become the master. A master checked or used within the last half of
// ControlPersist is taken to be up without asking.
func (s *SSH) connect(ctx context.Context, name string, h *host) error {
	if time.Now().UnixNano() < h.fresh.Load() {
		return nil
	}
	h.connect.Lock()
	defer h.connect.Unlock()
	if time.Now().UnixNano() < h.fresh.Load() {
		return nil // another command connected while this one waited
	}
	h.used.Store(true)
	if err := s.command(ctx, h, []string{"-O", "check"}, "").Run(); err == nil {
		s.markFresh(h)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("exec on %s: %w", name, context.Cause(ctx))
	}
	// -f -N: authenticate, then leave a master in the background (its
	// stdio on /dev/null) and exit 0.
	var stderr bytes.Buffer
	cmd := s.command(ctx, h, []string{"-f", "-N"}, "")
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("exec on %s: %w", name, context.Cause(ctx))
	}
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() == 255 {
			return &platform.ExecError{Instance: name, Transient: true,
				Err: fmt.Errorf("ssh %s: %s", h.dest.host, lastLine(stderr.Bytes(), "exit status 255"))}
		}
		return &platform.ExecError{Instance: name, Err: fmt.Errorf("ssh %s: starting the master connection: %w: %s", h.dest.host, err, lastLine(stderr.Bytes(), ""))}
	}
	s.markFresh(h)
	return nil
}

func (s *SSH) markFresh(h *host) {
	h.fresh.Store(time.Now().Add(s.cfg.ControlPersist / 2).UnixNano())
}

// lastLine returns the last non-empty line of b, at most 300 bytes of it,
// or def.
func lastLine(b []byte, def string) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = bytes.TrimSpace(b[i+1:])
	}
	if len(b) == 0 {
		return def
	}
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

// Close asks every master connection to exit. When SSH made the control
// directory (the default), Close then waits for every ssh process naming
// it to go, kills any that linger, and removes the directory; a directory
// given in Config may be shared, and is left alone. Call Close after every
// Exec has returned; Exec fails after Close.
func (s *SSH) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	dir, madeDir := s.dir, s.madeDir
	var hosts []*host
	for _, h := range s.hosts {
		hosts = append(hosts, h)
	}
	s.mu.Unlock()
	if dir == "" {
		return nil
	}

	var errs []error
	for _, h := range hosts {
		if !h.used.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Exit 255 with "No such file" means there is no master: fine.
		_ = s.command(ctx, h, []string{"-O", "exit"}, "").Run()
		cancel()
	}
	if !madeDir {
		// The directory may be shared with others' masters: asking ours to
		// exit is all this SSH may do.
		return nil
	}
	// "-O exit" returns once the master has been asked; wait for it to go.
	left := masters(dir)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		left = masters(dir)
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("ssh: killed master connections %v that did not exit when asked", left))
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("ssh: remove control directory: %w", err))
	}
	return errors.Join(errs...)
}

// Disconnect asks the master connection to inst, if there is one, to exit
// and waits for it to go; a later Exec on inst connects again. A platform
// whose hosts go away (a deleted cloud instance, whose name then no longer
// resolves, so that Close could not ask its master) calls it before the
// host goes.
func (s *SSH) Disconnect(ctx context.Context, inst platform.Instance) {
	s.mu.Lock()
	h := s.hosts[inst.Ref]
	s.mu.Unlock()
	if h == nil || s.cfg.NoMultiplex || !h.used.Load() {
		return
	}
	h.connect.Lock()
	defer h.connect.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Exit 255 with "No such file" means there is no master: fine.
	_ = s.command(cctx, h, []string{"-O", "exit"}, "").Run()
	h.fresh.Store(0)
	h.used.Store(false)
	// "-O exit" returns once the master has been asked; wait for it to go.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cctx.Err() != nil || !s.masterUp(cctx, h) {
			return
		}
	}
}

// masterUp reports whether h's master answers ssh -O check.
func (s *SSH) masterUp(ctx context.Context, h *host) bool {
	return s.command(ctx, h, []string{"-O", "check"}, "").Run() == nil
}

// masters returns the ssh processes whose command line names a socket in
// dir: the master connections of this SSH (a master renames itself
// "ssh: <socket> [mux]", or keeps the argv with ControlPath=<dir>/%C). It
// reads /proc, and finds nothing where there is none.
func masters(dir string) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	needle := []byte(dir + "/")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, needle) {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(filepath.Dir(p), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "ssh" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
