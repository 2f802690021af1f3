package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

func (a *app) refreshCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "refresh",
		Short: "Force a refresh of the ssh config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.stdout, "refreshing brev...")
			if err := a.refresh(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "brev has been refreshed")
			return nil
		},
	}
}

// refresh does what `brev refresh` does to the files: it rewrites
// ~/.brev/ssh_config from scratch with two Host entries (<name> and
// <name>-host) for every RUNNING instance, and makes ~/.ssh/config include
// it. Like the real one it writes in place and takes no lock, so refreshes
// that overlap can interleave; it records in the call log when this one
// began while another was in progress.
func (a *app) refresh() error {
	a.call.Refreshed = true
	done, concurrent, err := a.markRefreshing()
	if err != nil {
		return err
	}
	defer done()
	if concurrent {
		a.call.Concurrent = true
	}
	// Fetching keys and workspaces takes the real one a while; overlapping
	// refreshes overlap here.
	time.Sleep(time.Duration(a.opts.EffRefreshDelayMS()) * time.Millisecond)

	st, err := fakestate.Read(a.dir)
	if err != nil {
		return err
	}
	home := a.home
	var b strings.Builder
	fmt.Fprintf(&b, "# included in %s\n", filepath.Join(home, ".ssh", "config"))
	if o := st.Options.SSH; o != nil {
		srv := &sshtest.Server{Port: o.Port, User: o.User, KeyFile: o.KeyFile}
		for _, i := range st.Instances {
			if i.Status != fakestate.Running {
				continue
			}
			fmt.Fprintf(&b, "\n%s%s\n%s%s", srv.HostEntry(i.Name, i.Sandbox), control(st.Options), srv.HostEntry(i.Name+"-host", i.Sandbox), control(st.Options))
		}
	}
	brevDir := filepath.Join(home, ".brev")
	if err := os.MkdirAll(brevDir, 0o700); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	if err := os.WriteFile(filepath.Join(brevDir, "ssh_config"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}

	sshDir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	userConfig := filepath.Join(sshDir, "config")
	include := fmt.Sprintf("Include %q", filepath.Join(brevDir, "ssh_config"))
	old, err := os.ReadFile(userConfig)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("refresh: %w", err)
	}
	for _, line := range strings.Split(string(old), "\n") {
		if strings.TrimSpace(line) == include {
			return nil
		}
	}
	if err := os.WriteFile(userConfig, append([]byte(include+"\n"), old...), 0o600); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	return nil
}

// control returns the multiplexing lines the real host entries carry,
// when the fake is set to write them.
func control(o fakestate.Options) string {
	if o.ControlDir == "" {
		return ""
	}
	return fmt.Sprintf("\tControlMaster auto\n\tControlPath %s/brev-control-%%C\n\tControlPersist 10m\n", o.ControlDir)
}

// markRefreshing registers this refresh as in progress — a marker file
// under the state dir's refreshing/, flocked while it lasts — and reports
// whether another refresh held its marker at that moment. Two refreshes
// that start together both register before they look, so at least one of
// them sees the other. done releases the marker.
func (a *app) markRefreshing() (done func(), concurrent bool, err error) {
	dir := filepath.Join(a.dir, fakestate.RefreshDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("fake brev: %w", err)
	}
	mine, err := os.CreateTemp(dir, fmt.Sprintf("%d-*", os.Getpid()))
	if err != nil {
		return nil, false, fmt.Errorf("fake brev: %w", err)
	}
	if err := flock(mine, syscall.LOCK_EX); err != nil {
		mine.Close()
		os.Remove(mine.Name())
		return nil, false, fmt.Errorf("fake brev: lock refresh marker: %w", err)
	}
	done = func() {
		os.Remove(mine.Name())
		mine.Close()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		done()
		return nil, false, fmt.Errorf("fake brev: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if path == mine.Name() {
			continue
		}
		other, err := os.Open(path)
		if err != nil {
			continue // finished meanwhile
		}
		err = flock(other, syscall.LOCK_SH|syscall.LOCK_NB)
		other.Close() // drops the probe's lock, if it got one
		if errors.Is(err, syscall.EWOULDBLOCK) {
			concurrent = true
		}
	}
	return done, concurrent, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
