package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRequireCleanExit2 checks that apply --require-clean refuses a dirty
// tree with exit 2, listing the changed files, and starts nothing.
func TestRequireCleanExit2(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	plan := filepath.Join(dir, "plan.yaml")
	body := "taoflow: 1\nname: p\ninstances:\n  a: {}\nsteps:\n  - id: s\n    uses: run\n    with: {command: \"true\"}\n"
	if err := os.WriteFile(plan, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("add", "plan.yaml")
	git("commit", "-qm", "one")
	if err := os.WriteFile(plan, []byte(body+"# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--state", stateDir, "apply", "--require-clean", plan}, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	if code := exitCode(err, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "uncommitted changes") || !strings.Contains(errb.String(), "\n  plan.yaml") {
		t.Errorf("stderr does not list the changed file:\n%s", errb.String())
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("a refused apply made the state directory (%v)", err)
	}
}
