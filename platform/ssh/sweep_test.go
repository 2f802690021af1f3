package ssh

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweep: the control directory a dead run left (empty, or holding only
// sockets no ssh uses) is removed for that run; one holding anything else,
// and other runs' recent ones, are left.
func TestSweep(t *testing.T) {
	run := "sweep-" + t.Name() + "-" + hex.EncodeToString([]byte{byte(os.Getpid()), byte(os.Getpid() >> 8)})
	sum := sha256.Sum256([]byte(run))
	mk := func() string {
		d, err := os.MkdirTemp("/tmp", "tf-"+hex.EncodeToString(sum[:3])+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	empty := mk()
	withSocket := mk()
	l, err := net.Listen("unix", filepath.Join(withSocket, "abc"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	withFile := mk()
	if err := os.WriteFile(filepath.Join(withFile, "note"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := os.MkdirTemp("/tmp", "tf-000000-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })

	removed := Sweep(run)
	for _, d := range []string{empty, withSocket} {
		if !slices.Contains(removed, d) {
			t.Errorf("Sweep(%s) = %v; want %s removed", run, removed, d)
		}
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is still there", d)
		}
	}
	for _, d := range []string{withFile, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if removed := Sweep(""); slices.Contains(removed, other) {
		t.Errorf("Sweep(\"\") removed %s, made just now", other)
	}
}
