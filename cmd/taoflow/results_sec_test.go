package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/state"
)

// forgeUploads records a run whose upload nodes say what a state from
// elsewhere may say: each node's cell, step and facts as given.
func forgeUploads(t *testing.T, run string, nodes []state.Node) {
	t.Helper()
	recordRun(t, run, state.Run{}, "local", map[string]string{})
	store, err := state.Open(".taoflow")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	for _, n := range nodes {
		n.RunID, n.State = run, "succeeded"
		if n.ID == "" {
			n.ID = n.Step + "[" + n.Cell + "]"
		}
		if err := store.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		for k, v := range n.Facts {
			if err := store.SetNodeFact(ctx, run, n.ID, k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// uploaded writes a results directory with its manifest (no checksums:
// a count and bytes), as a file:// upload leaves it.
func uploaded(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metrics.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "taoflow-run.json"), []byte(`{"files": 1, "bytes": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir
}

// TestResultsDownloadForgedState (issue 22 item 3): results --download
// takes nothing from the state unchecked. Cell and step names that are
// not ids taoflow makes ("../../..") are refused and nothing is written
// outside DIR; an S3 endpoint the state names gets no request until the
// user confirms it with --endpoint-url (exit 2 before anything is
// copied).
func TestResultsDownloadForgedState(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	src := uploaded(t, filepath.Join(dir, "src"))
	const run = "forged-0101-000000-aaaa"
	forgeUploads(t, run, []state.Node{
		{Step: "upload", Cell: "../../..", Facts: map[string]string{"upload_url": src}},
		{Step: "../../../escaped", Cell: "lr-1", ID: "x", Facts: map[string]string{"upload_url": src}},
		{Step: "upload", Cell: "lr-2", Facts: map[string]string{"upload_url": src}},
	})
	if err := os.Mkdir("back", 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := applyCLI(t, "results", run, "--download", filepath.Join(dir, "back", "a", "b"))
	if code != exitFailed || !strings.Contains(errOut, "which is not an id taoflow makes: not downloaded") {
		t.Errorf("exit %d; want 1 naming the bad ids\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "back", "a", "b", "lr-2", "upload", "metrics.json")); err != nil {
		t.Errorf("the good cell was not downloaded: %v\n%s%s", err, out, errOut)
	}
	for _, p := range []string{filepath.Join(dir, "upload"), filepath.Join(dir, "escaped"), filepath.Join(dir, "back", "escaped")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written: outside DIR", p)
		}
	}

	// An endpoint the state names: refused until confirmed.
	const run2 = "forged-0101-000000-bbbb"
	forgeUploads(t, run2, []state.Node{
		{Step: "upload", Cell: "lr-1", Facts: map[string]string{"upload_url": "s3://bucket/r/lr-1", "endpoint_url": "http://attacker.example:9000"}},
		{Step: "upload", Cell: "lr-2", Facts: map[string]string{"upload_url": src}},
	})
	code, out, errOut = applyCLI(t, "results", run2, "--download", "back2")
	if code != exitUsage || !strings.Contains(errOut, "the S3 endpoint http://attacker.example:9000 (upload[lr-1])") || !strings.Contains(errOut, "confirm it: --endpoint-url http://attacker.example:9000") {
		t.Errorf("exit %d; want 2 naming the endpoint\n%s%s", code, out, errOut)
	}
	if _, err := os.Lstat("back2"); err == nil {
		t.Errorf("back2 was made although nothing may be downloaded")
	}
	code, out, errOut = applyCLI(t, "results", run2, "--download", "back2", "--endpoint-url", "http://attacker.example:9000")
	if strings.Contains(errOut, "confirm it") || !strings.Contains(out, "upload[lr-2]: 1 files") {
		t.Errorf("with the endpoint confirmed: exit %d\n%s%s", code, out, errOut)
	}
}

// TestResultsDownloadDir (issue 22 item 4): results --download refuses a
// DIR that another user owns or that group or others can write (they
// could plant links in it); inside a DIR of the user's, a link planted at
// a copy's place (left from when it was shared) makes no write outside
// DIR; a directory there that is not an earlier download is left alone;
// an earlier download is replaced.
func TestResultsDownloadDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	src := uploaded(t, filepath.Join(dir, "src"))
	const run = "mine-0101-000000-aaaa"
	forgeUploads(t, run, []state.Node{{Step: "upload", Cell: "lr-1", Facts: map[string]string{"upload_url": src}}})

	if err := os.Mkdir("shared", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("shared", 0o777); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := applyCLI(t, "results", run, "--download", "shared")
	if code != exitUsage || !strings.Contains(errOut, "refusing to download into shared: it is writable by group or others (mode 0777)") {
		t.Errorf("a 0777 DIR: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Chmod("shared", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown("shared", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = applyCLI(t, "results", run, "--download", "shared")
	if code != exitUsage || !strings.Contains(errOut, "owned by uid 65534, not by you") {
		t.Errorf("another user's DIR: exit %d\n%s%s", code, out, errOut)
	}

	// Links planted inside a DIR of one's own: the copy never goes
	// through them.
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("back", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join("back", "lr-1")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = applyCLI(t, "results", run, "--download", "back")
	if code == exitOK {
		t.Errorf("a download through a planted link succeeded\n%s%s", out, errOut)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("the download wrote outside DIR, through a link: %v", entries)
	}

	// A directory of the user's at the copy's place is left alone; an
	// earlier download is replaced.
	if err := os.Remove(filepath.Join("back", "lr-1")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join("back", "lr-1", "upload"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("back", "lr-1", "upload", "notes"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = applyCLI(t, "results", run, "--download", "back")
	if code == exitOK || !strings.Contains(errOut, "is not an earlier download") {
		t.Errorf("over a directory of the user's: exit %d\n%s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join("back", "lr-1", "upload", "notes")); err != nil || string(b) != "mine" {
		t.Errorf("the user's notes: %q, %v", b, err)
	}
	if err := os.RemoveAll(filepath.Join("back", "lr-1")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, out, errOut = applyCLI(t, "results", run, "--download", "back")
		if code != exitOK {
			t.Errorf("download (again): exit %d\n%s%s", code, out, errOut)
		}
	}
	if left, _ := filepath.Glob(filepath.Join("back", "lr-1", ".taoflow-download-*")); len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}
