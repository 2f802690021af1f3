package brev

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
)

// transport returns the ssh platform of TransportSSH, made on first use.
//
// A master connection can only be asked to exit while its instance's alias
// is in brev's ssh config, and `brev refresh` drops the aliases of deleted
// instances: so Delete and Stop disconnect an instance first (closeMaster),
// and Close lets platform/ssh ask the rest and kill any that linger.
func (b *Brev) transport() (*ssh.SSH, error) {
	b.sshMu.Lock()
	defer b.sshMu.Unlock()
	if b.closed.Load() {
		return nil, errors.New("the brev platform is closed")
	}
	if b.ssh == nil {
		b.ssh = ssh.New(b.sshCfg)
	}
	return b.ssh, nil
}

// closeMaster asks the master connection to the instance alias names, if
// any, to exit, while the alias still resolves. With TransportExec that is
// the master brev's own ssh left (its host entries say ControlMaster auto,
// ControlPersist 10m).
func (b *Brev) closeMaster(ctx context.Context, alias string) {
	b.sshMu.Lock()
	s := b.ssh
	used := b.execUsed[alias]
	delete(b.execUsed, alias)
	b.sshMu.Unlock()
	if s != nil {
		s.Disconnect(ctx, platform.Instance{Name: alias, Ref: alias})
	}
	if used {
		b.exitBrevMaster(ctx, alias)
	}
}

// execUse notes that brev exec reached alias, whose master then outlives
// the command (see closeMaster).
func (b *Brev) execUse(alias string) {
	b.sshMu.Lock()
	defer b.sshMu.Unlock()
	if b.execUsed == nil {
		b.execUsed = map[string]bool{}
	}
	b.execUsed[alias] = true
}

// exitBrevMaster runs `ssh -O exit alias` with brev's ssh config, so that
// the master connection brev exec's ssh left (ControlPersist 10m) goes
// now. No master is fine.
func (b *Brev) exitBrevMaster(ctx context.Context, alias string) {
	if b.cfg.Home == "" || !safeName(alias) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ssh := func(op string) error {
		cmd := exec.CommandContext(cctx, "ssh", "-F", filepath.Join(b.cfg.Home, ".ssh", "config"), "-O", op, "--", alias)
		cmd.Env = b.env
		return cmd.Run()
	}
	if ssh("exit") != nil {
		return // no master
	}
	// "-O exit" returns once the master has been asked; wait for it to go.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && cctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		if ssh("check") != nil {
			return
		}
	}
}

// closeTransport closes the ssh platform, if one was made, and asks the
// masters brev exec left to exit.
func (b *Brev) closeTransport() error {
	b.sshMu.Lock()
	s := b.ssh
	var used []string
	for alias := range b.execUsed {
		used = append(used, alias)
	}
	b.execUsed = nil
	b.sshMu.Unlock()
	for _, alias := range used {
		b.exitBrevMaster(context.Background(), alias)
	}
	if s == nil {
		return nil
	}
	return s.Close()
}
