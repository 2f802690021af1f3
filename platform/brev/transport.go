package brev

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
	"syscall"
	"time"

	"github.com/taoflow/taoflow/platform/ssh"
)

// closeMasterTimeout bounds the ssh command that asks one master
// connection to exit.
const closeMasterTimeout = 10 * time.Second

// masterLinger is how long Close waits for master connections it asked to
// exit before it kills them.
const masterLinger = 2 * time.Second

// transport returns the ssh platform of TransportSSH, made on first use.
//
// Unless Config.SSH names a control directory, the Brev makes its own (a
// private /tmp/tf-<hash of Run>-<random>, as platform/ssh would) and owns
// it: a master connection to an instance can only be asked to exit while
// the instance's alias is in brev's ssh config, and `brev refresh` drops
// the aliases of deleted instances, so Delete and Stop ask first, and
// Close kills any master that survives in the directory, then removes it.
func (b *Brev) transport() (*ssh.SSH, error) {
	b.sshMu.Lock()
	defer b.sshMu.Unlock()
	if b.closed.Load() {
		return nil, errors.New("the brev platform is closed")
	}
	if b.ssh != nil {
		return b.ssh, nil
	}
	sc := b.sshCfg
	if sc.ControlDir == "" && !sc.NoMultiplex {
		sum := sha256.Sum256([]byte(sc.Run))
		dir, err := os.MkdirTemp("/tmp", "tf-"+hex.EncodeToString(sum[:3])+"-")
		if err != nil {
			return nil, fmt.Errorf("ssh control directory: %w", err)
		}
		sc.ControlDir, b.madeDir = dir, true
	}
	b.sshDir = sc.ControlDir
	b.ssh = ssh.New(sc)
	return b.ssh, nil
}

// closeMaster asks the master connection to alias, if any, to exit, while
// the alias still resolves. Failures are ignored: there may be no master.
func (b *Brev) closeMaster(ctx context.Context, alias string) {
	b.sshMu.Lock()
	dir, started := b.sshDir, b.ssh != nil
	b.sshMu.Unlock()
	if !started || dir == "" {
		return
	}
	sc := b.sshCfg
	bin := sc.Binary
	if bin == "" {
		bin = "ssh"
	}
	args := []string{"-F", sc.ConfigFile, "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
		"-o", "ControlPath=" + strings.ReplaceAll(dir, "%", "%%") + "/%C"}
	args = append(args, sc.ExtraOptions...)
	args = append(args, "-O", "exit", "--", alias)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeMasterTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Env = sshEnviron()
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	_ = cmd.Run() // exit 255 "No such file or directory": no master
}

// closeTransport closes the ssh platform and, when the Brev made the
// control directory, kills the masters that did not exit and removes it.
func (b *Brev) closeTransport() error {
	b.sshMu.Lock()
	s, dir, made := b.ssh, b.sshDir, b.madeDir
	b.sshMu.Unlock()
	if s == nil {
		return nil
	}
	err := s.Close()
	if !made {
		return err
	}
	left := masters(dir)
	for deadline := time.Now().Add(masterLinger); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		left = masters(dir)
	}
	// Masters of instances deleted meanwhile: their alias is gone from
	// brev's config, so they could not be asked.
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if rmErr := os.RemoveAll(dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("ssh: remove control directory: %w", rmErr))
	}
	return err
}

// sshEnviron is the environment of an ssh command: what it needs to find
// its keys and agent, as platform/ssh gives it, and nothing of taoflow's
// environment, which holds secret values.
func sshEnviron() []string {
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

// masters returns the ssh processes whose command line names a socket in
// dir, read from /proc.
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
