package testrig

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Slurm is a single-node Slurm cluster (slurmctld and slurmd from Debian's
// slurm-wlm, authenticated by a munged of its own) running as root on this
// machine, on private ports, with every file in one temporary directory.
//
// The node declares 32 CPUs (whatever this machine has: config_overrides,
// so that the tests of a package, run in parallel, do not queue behind each
// other's jobs),
// 4000 MB and two GRES GPUs whose File= are device nodes made in the
// directory, so jobs asking --gpus get CUDA_VISIBLE_DEVICES. Partitions:
// debug (the default, MaxTime=INFINITE) and short (MaxTime=1 minute).
type Slurm struct {
	// Dir holds slurm.conf, gres.conf, the munge socket and key, state,
	// spool and logs.
	Dir string
	// Conf is slurm.conf's path: every Slurm client needs SLURM_CONF=Conf.
	Conf string
	// Node is the node's name (this host's short name).
	Node string
	// CPUs is how many CPUs the node declares.
	CPUs int

	procs []*exec.Cmd
}

// Env returns the environment a Slurm client command needs, SLURM_CONF.
func (s *Slurm) Env() []string { return []string{"SLURM_CONF=" + s.Conf} }

// Command runs a Slurm client (squeue, scancel, ...) against the cluster
// and returns its stdout.
func (s *Slurm) Command(name string, args ...string) (string, error) {
	return command(s.Env(), nil, name, args...)
}

// Jobs returns the lines `squeue -h -o '%i %j %T'` prints for every job of
// the cluster still in the queue (pending, running, completing).
func (s *Slurm) Jobs(t testing.TB) []string {
	t.Helper()
	out, err := s.Command("squeue", "-h", "-o", "%i %j %T")
	if err != nil {
		t.Fatalf("testrig: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// SlurmMissing says what to install when this machine cannot run the rig's
// cluster, or "" when it can.
func SlurmMissing() string {
	for _, bin := range []string{"slurmctld", "slurmd", "sbatch", "squeue", "munged", "mungekey"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Sprintf("%s not found: install slurm-wlm munge (make deps)", bin)
		}
	}
	if os.Geteuid() != 0 {
		return "the single-node Slurm cluster runs as root: run the tests as root"
	}
	return ""
}

var (
	sharedOnce  sync.Once
	sharedSlurm *Slurm
	sharedErr   error
)

// SharedSlurm returns the one cluster of this test binary, starting it on
// first use; StopSharedSlurm (from TestMain, after m.Run) stops it. A test
// on a machine without Slurm is skipped with the install hint; a cluster
// that fails to start fails the test.
func SharedSlurm(t testing.TB) *Slurm {
	t.Helper()
	if why := SlurmMissing(); why != "" {
		t.Skipf("testrig: %s", why)
	}
	sharedOnce.Do(func() { sharedSlurm, sharedErr = startSlurm() })
	if sharedErr != nil {
		t.Fatalf("testrig: %v", sharedErr)
	}
	return sharedSlurm
}

// StartSlurm starts a cluster of the test's own, stopped by t.Cleanup: for
// a test (a testscript run, say) whose subtests share it. Skipped, with
// the install hint, where Slurm is missing.
func StartSlurm(t testing.TB) *Slurm {
	t.Helper()
	if why := SlurmMissing(); why != "" {
		t.Skipf("testrig: %s", why)
	}
	s, err := startSlurm()
	if err != nil {
		t.Fatalf("testrig: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StopSharedSlurm stops the cluster SharedSlurm started, if any: its
// jobs are cancelled, its daemons ended and its directory removed.
func StopSharedSlurm() {
	if sharedSlurm != nil {
		sharedSlurm.Stop()
	}
}

// startSlurm starts munged, slurmctld and slurmd in a fresh directory and
// waits until the node is idle.
func startSlurm() (s *Slurm, err error) {
	dir, err := os.MkdirTemp("", "taoflow-slurm-")
	if err != nil {
		return nil, err
	}
	// Slurm's daemons and munged reach their files as root; clients (any
	// user) need to reach the munge socket.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	host, _, _ = strings.Cut(host, ".")
	s = &Slurm{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: host, CPUs: 32}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return s, err
		}
	}
	// Two GPU device nodes, as NVIDIA's major 195: Slurm checks that
	// gres.conf's File= exist and hands out their indices.
	for i := range 2 {
		dev := filepath.Join(dir, fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o600, int(195<<8|uint32(i))); err != nil {
			return s, fmt.Errorf("making a GPU device node for gres.conf: %w", err)
		}
	}
	key := filepath.Join(dir, "munge.key")
	if _, err := command(nil, nil, "mungekey", "-c", "-k", key); err != nil {
		return s, err
	}
	sock := filepath.Join(dir, "munge.sock")
	if err := s.start("munged", "munged", "-F", "--force", "--socket="+sock, "--key-file="+key,
		"--pid-file="+filepath.Join(dir, "munged.pid"), "--seed-file="+filepath.Join(dir, "munged.seed"),
		"--log-file="+filepath.Join(dir, "munged.log")); err != nil {
		return s, err
	}
	if !Within(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }) {
		return s, fmt.Errorf("munged made no socket in 10s: %s", s.logTail("munged.out"))
	}
	ctldPort, dPort := freePort(), freePort()
	conf := fmt.Sprintf(`ClusterName=tf%d
SlurmctldHost=%[2]s(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
AuthType=auth/munge
AuthInfo=socket=%[5]s
CredType=cred/munge
StateSaveLocation=%[6]s/state
SlurmdSpoolDir=%[6]s/spool
SlurmctldPidFile=%[6]s/slurmctld.pid
SlurmdPidFile=%[6]s/slurmd.pid
SlurmctldLogFile=%[6]s/slurmctld.log
SlurmdLogFile=%[6]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=1
MinJobAge=300
GresTypes=gpu
NodeName=%[2]s NodeAddr=127.0.0.1 CPUs=%[7]d RealMemory=4000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=%[2]s Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=%[2]s MaxTime=1 State=UP
`, os.Getpid(), host, ctldPort, dPort, sock, dir, s.CPUs)
	gres := fmt.Sprintf("NodeName=%s Name=gpu File=%s/nvidia[0-1]\n", host, dir)
	if err := os.WriteFile(s.Conf, []byte(conf), 0o644); err != nil {
		return s, err
	}
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		return s, err
	}
	if err := s.start("slurmctld", "slurmctld", "-D"); err != nil {
		return s, err
	}
	if err := s.start("slurmd", "slurmd", "-D"); err != nil {
		return s, err
	}
	var state string
	if !Within(30*time.Second, func() bool {
		out, err := s.Command("sinfo", "-h", "-N", "-o", "%T")
		state = strings.TrimSpace(out)
		return err == nil && strings.HasPrefix(state, "idle")
	}) {
		return s, fmt.Errorf("the Slurm node is not idle after 30s (sinfo: %q); slurmctld:\n%s\nslurmd:\n%s", state, s.logTail("slurmctld.log"), s.logTail("slurmd.log"))
	}
	return s, nil
}

// start runs a daemon in the foreground of its own process group, its
// output in DIR/NAME.out.
func (s *Slurm) start(name, bin string, args ...string) error {
	f, err := os.Create(filepath.Join(s.Dir, name+".out"))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// Stop cancels every job, ends the daemons (TERM, then KILL after 5s, to
// each one's process group: slurmstepd included) and removes the
// directory.
func (s *Slurm) Stop() {
	if len(s.procs) > 1 {
		_, _ = s.Command("scancel", "--full", "--quiet", "--state=PENDING,RUNNING,SUSPENDED")
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		cmd := s.procs[i]
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
	_ = os.RemoveAll(s.Dir)
}

// logTail returns the end of one of the cluster's log files.
func (s *Slurm) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, name))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// freePort is FreePort without a test: a port on 127.0.0.1 free a moment
// ago (0 when none could be had, which Slurm then refuses loudly).
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
