package brev

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The ledger is how `taoflow reap` tells this user's leftovers from a
// teammate's. `brev ls --json` lists every instance of the org under an API
// key, and also those shared with the user, and says nothing of who made
// them; names alone (tf-…) do not tell. So Create writes the name of every
// instance it is about to make into a file of this user on this machine
// (one name a line, appended before `brev create` runs, so a crash during
// the create is covered) and reap deletes only names found there.

// LedgerFile returns where the names of the instances taoflow creates are
// recorded for the user whose environment env is:
// $XDG_STATE_HOME/taoflow/brev-created, else
// $HOME/.local/state/taoflow/brev-created. "" when neither is set.
func LedgerFile(env []string) string {
	if d := getenv(env, "XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "taoflow", "brev-created")
	}
	if h := getenv(env, "HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "taoflow", "brev-created")
	}
	return ""
}

// record appends name to the ledger file path, under an exclusive lock
// (several applies may create at once).
func record(path, name string) error {
	if path == "" {
		return errors.New("no ledger file (HOME is not set)")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if _, err := f.WriteString(name + "\n"); err != nil {
		return err
	}
	return f.Close()
}

// Record writes name into the ledger at path, as Create does before it
// creates an instance of that name.
func Record(path, name string) error {
	if !validName(name) {
		return fmt.Errorf("%q is not a brev instance name", name)
	}
	return record(path, name)
}

// Recorded returns the names in the ledger file path: the instances
// taoflow, run by this user on this machine, set out to create. A missing
// file holds none.
func Recorded(path string) (map[string]bool, error) {
	names := map[string]bool{}
	if path == "" {
		return names, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return names, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" {
			names[n] = true
		}
	}
	return names, sc.Err()
}

// Ledger returns the ledger file this Brev records its creates in.
func (b *Brev) Ledger() string { return b.ledger }
