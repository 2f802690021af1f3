package brev

import (
	"context"
	"errors"

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
// any, to exit, while the alias still resolves.
func (b *Brev) closeMaster(ctx context.Context, alias string) {
	b.sshMu.Lock()
	s := b.ssh
	b.sshMu.Unlock()
	if s != nil {
		s.Disconnect(ctx, platform.Instance{Name: alias, Ref: alias})
	}
}

// closeTransport closes the ssh platform, if one was made.
func (b *Brev) closeTransport() error {
	b.sshMu.Lock()
	s := b.ssh
	b.sshMu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}
