package sshtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
)

// SSHD is the OpenSSH server Start runs. sshd re-executes itself for every
// connection, so it must be an absolute path.
const SSHD = "/usr/sbin/sshd"

// Alias is the Host name the client config file gives the server.
const Alias = "tf-test"

// startTimeout bounds how long Start waits for sshd to listen: a hang guard,
// not a measurement.
const startTimeout = 30 * time.Second

// Server is one running sshd that accepts the current user with KeyFile.
type Server struct {
	// Port is the TCP port sshd listens on, on 127.0.0.1.
	Port int
	// User is the login name (the user running the test).
	User string
	// Dir is the server's private directory: keys, configs, log.
	Dir string
	// KeyFile is the client's private key (ed25519, no passphrase).
	KeyFile string
	// ConfigFile is an ssh_config (for ssh -F) with a Host entry Alias
	// that reaches the server with KeyFile and no host-key checking.
	ConfigFile string
	// Alias is the Host name in ConfigFile ("tf-test").
	Alias string
	// LogFile is sshd's log (LogLevel VERBOSE).
	LogFile string

	cmd    *exec.Cmd
	exited chan struct{}
}

// Dest returns the server as an ssh destination: "user@127.0.0.1:port".
// It needs ConfigFile (or the same options) for the key and host key.
func (s *Server) Dest() string {
	return fmt.Sprintf("%s@127.0.0.1:%d", s.User, s.Port)
}

// Handshakes returns how many logins the server has accepted so far: each
// is one full TCP connection, key exchange and authentication. Sessions
// multiplexed over an existing connection do not count.
func (s *Server) Handshakes() int {
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("Accepted publickey for "))
}

// Start runs a fresh sshd for the test and stops it when the test ends,
// together with the per-connection processes it forked. It fails the test
// (never skips it) when sshd is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		t.Fatalf("sshtest: %s not found (%v): install openssh-server (make deps)", SSHD, err)
	}
	if _, err := exec.LookPath("nc"); err != nil {
		t.Fatalf("sshtest: nc not found: install netcat-openbsd (make deps); sandbox aliases connect through it")
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatalf("sshtest: ssh-keygen not found: install openssh-client (make deps)")
	}
	// sshd's privilege separation directory; only root can create it, and
	// only a root sshd needs it.
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshtest: %v", err)
		}
	}
	name, err := currentUser()
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	dir := t.TempDir()
	s := &Server{
		User:       name,
		Dir:        dir,
		KeyFile:    filepath.Join(dir, "id_ed25519"),
		ConfigFile: filepath.Join(dir, "ssh_config"),
		Alias:      Alias,
		LogFile:    filepath.Join(dir, "sshd.log"),
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	for _, key := range []string{hostKey, s.KeyFile} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tf-test", "-f", key).CombinedOutput()
		if err != nil {
			t.Fatalf("sshtest: ssh-keygen %s: %v\n%s", key, err, out)
		}
	}
	pub, err := os.ReadFile(s.KeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, pub, 0o600); err != nil {
		t.Fatal(err)
	}

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("sshtest: %v", err)
		}
		err = s.start(port, hostKey, authKeys)
		if err == nil {
			break
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			t.Fatalf("sshtest: %v", err)
		}
	}
	if s.cmd == nil {
		t.Fatalf("sshtest: no free port after 5 tries: %v", lastErr)
	}
	t.Cleanup(s.stop)

	// The alias, and the key for user@127.0.0.1:port destinations.
	client := s.HostEntry(s.Alias, "") + "\n" + fmt.Sprintf(`Host 127.0.0.1
	IdentityFile %s
	IdentitiesOnly yes
	PreferredAuthentications publickey
	StrictHostKeyChecking no
	UserKnownHostsFile /dev/null
	GlobalKnownHostsFile /dev/null
	LogLevel ERROR
`, s.KeyFile)
	if err := os.WriteFile(s.ConfigFile, []byte(client), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

var errPortTaken = errors.New("port already in use")

// sandboxScript is sshd's ForceCommand: a session whose client sent
// TF_SANDBOX (an alias made by AddSandbox) gets that directory as its HOME
// and working directory, so several "hosts" on one server keep apart files
// the way separate machines would. Without it the command runs as sshd
// would run it. A sandbox next to which a file <sandbox>.down exists is a
// machine that is down: its sessions fail as ssh does when the host
// refuses connections (exit 255). A sandbox next to which a file
// <sandbox>.hang exists is a hung machine (a VM thrashing on memory, a hung
// disk or home): connections and the master connection are fine, but every
// session started from then on never answers and never ends (see Hang):
// not before the sandbox is gone (the test's cleanup), or the server stops
// (stop kills it by this script's path in its command line). A
// directory <sandbox>.bin holds the machine's own commands, first on PATH
// (the fake brev's shutdown). A sandbox's file .sandbox-env, when present, is sourced first: the
// profile of a login node (the Slurm tests export SLURM_CONF there).
const sandboxScript = `#!/bin/sh
if [ -n "$TF_SANDBOX" ] && [ -e "$TF_SANDBOX.down" ]; then
	echo "ssh: connect to host $(basename "$TF_SANDBOX") port 22: Connection refused" >&2
	exit 255
fi
if [ -n "$TF_SANDBOX" ] && [ -e "$TF_SANDBOX.hang" ]; then
	while [ -d "$TF_SANDBOX" ]; do sleep 1; done
	exit 255
fi
if [ -n "$TF_SANDBOX" ]; then
	HOME=$TF_SANDBOX; export HOME
	if [ -d "$TF_SANDBOX.bin" ]; then PATH=$TF_SANDBOX.bin:$PATH; export PATH; fi
	cd "$HOME" || exit 1
	# A login node's profile (SLURM_CONF for a Slurm login node).
	if [ -f "$HOME/.sandbox-env" ]; then . "$HOME/.sandbox-env"; fi
fi
unset TF_SANDBOX
if [ -z "${SSH_ORIGINAL_COMMAND+set}" ]; then exec "${SHELL:-/bin/sh}" -l; fi
exec "${SHELL:-/bin/sh}" -c "$SSH_ORIGINAL_COMMAND"
`

// AddSandbox makes alias a Host of its own in ConfigFile: the same server,
// but every session through it runs with HOME and working directory set to
// a private directory, which it returns (created 0700). It stands for a
// separate machine in tests of several instances.
func (s *Server) AddSandbox(alias string) (string, error) {
	home := filepath.Join(s.Dir, "sandboxes", alias)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(s.ConfigFile, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + s.HostEntry(alias, home)); err != nil {
		return "", err
	}
	return home, nil
}

// Hang makes the sandbox home (AddSandbox) a hung machine, or a healthy
// one again: while hung, every session started through its alias is
// accepted and then never answers nor ends, while connections, ssh's
// master connection and the sessions already running stay as they are.
// The server kills the hung sessions when the test ends.
func Hang(home string, hung bool) error {
	if !hung {
		if err := os.Remove(home + ".hang"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(home+".hang", nil, 0o600)
}

// HostEntry returns an ssh_config Host block named alias that reaches the
// server with its key and runs every session in home (see AddSandbox; an
// empty home is the user's own). A fake brev writes these into
// ~/.brev/ssh_config.
//
// With a home, the entry connects through `nc 127.0.0.1 PORT` (Debian's
// netcat-openbsd) under a host name made from home: ssh names its control
// socket after the host, port and user (%C), so without this every sandbox
// of the server would share one master connection — and the environment,
// hence the HOME, of the session that started it.
func (s *Server) HostEntry(alias, home string) string {
	hostName, proxy := "127.0.0.1", ""
	if home != "" {
		sum := sha256.Sum256([]byte(home))
		hostName = "sandbox-" + hex.EncodeToString(sum[:6])
		proxy = fmt.Sprintf("\tProxyCommand nc 127.0.0.1 %d\n", s.Port)
	}
	e := fmt.Sprintf(`Host %s
	HostName %s
	Port %d
	User %s
	IdentityFile %s
	IdentitiesOnly yes
	PreferredAuthentications publickey
	StrictHostKeyChecking no
	UserKnownHostsFile /dev/null
	GlobalKnownHostsFile /dev/null
	LogLevel ERROR
`, alias, hostName, s.Port, s.User, s.KeyFile)
	if home != "" {
		e += proxy + fmt.Sprintf("\tSetEnv TF_SANDBOX=%s\n", home)
	}
	return e
}

// start writes sshd_config for port and runs sshd until it listens.
func (s *Server) start(port int, hostKey, authKeys string) error {
	cfg := filepath.Join(s.Dir, "sshd_config")
	conf := fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxSessions 10
LogLevel VERBOSE
Subsystem sftp internal-sftp
AcceptEnv TF_SANDBOX
SetEnv SHLVL=1
ForceCommand %s
`, port, hostKey, filepath.Join(s.Dir, "sshd.pid"), authKeys, filepath.Join(s.Dir, "sandbox.sh"))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "sandbox.sh"), []byte(sandboxScript), 0o700); err != nil {
		return err
	}
	// The log is appended to; start each attempt from an empty one so the
	// readiness line and the handshake count are this server's.
	if err := os.WriteFile(s.LogFile, nil, 0o600); err != nil {
		return err
	}
	stderr, err := os.Create(filepath.Join(s.Dir, "sshd.stderr"))
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd := exec.Command(SSHD, "-D", "-E", s.LogFile, "-f", cfg)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", SSHD, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	ready := fmt.Sprintf("Server listening on 127.0.0.1 port %d.", port)
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			diag := s.diagnostics()
			if strings.Contains(diag, "Address already in use") {
				return fmt.Errorf("%w: %d", errPortTaken, port)
			}
			return fmt.Errorf("sshd exited before listening on port %d:\n%s", port, diag)
		default:
		}
		if b, _ := os.ReadFile(s.LogFile); bytes.Contains(b, []byte(ready)) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("sshd did not listen on port %d within %v:\n%s", port, startTimeout, s.diagnostics())
		}
	}
	// It says it listens; make sure the port is sshd's and not a stranger's.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), startTimeout)
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("dial sshd on port %d: %w", port, err)
	}
	_ = conn.Close()
	s.Port, s.cmd = port, cmd
	s.exited = exited
	return nil
}

func (s *Server) diagnostics() string {
	var b strings.Builder
	for _, name := range []string{"sshd.stderr", "sshd.log"} {
		if out, err := os.ReadFile(filepath.Join(s.Dir, name)); err == nil && len(out) > 0 {
			fmt.Fprintf(&b, "--- %s\n%s", name, out)
		}
	}
	return b.String()
}

// stop kills every process the server started — the per-connection
// processes and the commands running in their sessions, which sshd would
// leave running: it sends no SIGHUP to a session without a terminal — and
// then the server itself.
func (s *Server) stop() {
	pid := s.cmd.Process.Pid
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// A hung session whose client went away is no descendant any more
	// (its connection's process ended; it was reparented): its command
	// line names the sandbox script.
	for _, p := range testrig.ProcessesWith(filepath.Join(s.Dir, "sandbox.sh")) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-s.exited
	}
}

// SSHProcesses returns the ssh client processes (master connections
// included) whose command line contains text, read from /proc: a test's
// check that nothing of a run outlived it.
func SSHProcesses(text string) []int {
	var pids []int
	for _, p := range testrig.Processes(func(p testrig.Proc) bool { return p.Has(text) && p.Comm() == "ssh" }) {
		pids = append(pids, p.PID)
	}
	return pids
}

// descendants returns the processes below pid, read from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, st := range testrig.Stats() {
		children[st.PPID] = append(children[st.PPID], st.PID)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func currentUser() (string, error) {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if name := os.Getenv("USER"); name != "" {
		return name, nil
	}
	return "", errors.New("cannot tell the current user's name")
}
