package main

// No size limit from argv (issue 21 item 1): a plan whose command is
// 200 KiB, and an upload whose manifest (taoflow-run.json, written on the
// instance by a script that carries it) is over 128 KiB, run on the local
// platform. Both used to travel as one `sh -c SCRIPT` argument, over the
// kernel's 128 KiB limit on one argument (MAX_ARG_STRLEN): apply failed
// with "argument list too long" — the manifest's after the training.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBigScript(t *testing.T) {
	t.Run("command", func(t *testing.T) { bigScript(t, true, false) })
	t.Run("manifest", func(t *testing.T) { bigScript(t, false, true) })
}

// bigScript runs a plan on the local platform whose command is 200 KiB
// (bigCommand), or whose upload's manifest is over 128 KiB (bigManifest),
// and checks what reached the file:// upload.
func bigScript(t *testing.T, bigCommand, bigManifest bool) {
	dir := t.TempDir()
	// 200 KiB of text, one 99-byte line after another, written by the
	// command itself from a here-document.
	var text strings.Builder
	for i := 0; text.Len() < 200<<10; i++ {
		fmt.Fprintf(&text, "%06d %s\n", i, strings.Repeat("x", 91))
	}
	var cmd strings.Builder
	cmd.WriteString("mkdir -p ~/r/many && cat > ~/r/big.txt <<'EOF'\n")
	if bigCommand {
		cmd.WriteString(text.String())
	}
	cmd.WriteString("EOF\n")
	files := 2
	if bigManifest {
		files = 2000 // the manifest lists each one's sha256: ~230 KiB
	}
	fmt.Fprintf(&cmd, `cd ~/r/many && awk 'BEGIN { for (i = 0; i < %d; i++) { f = sprintf("result-file-%%06d.txt", i); print i > f; close(f) } }'`+"\n", files)
	var plan strings.Builder
	plan.WriteString("taoflow: 1\nname: bigscript\ninstances: {box: {}}\nsteps:\n  - id: make\n    uses: run\n    with:\n      results: ~/r\n      command: |\n")
	for _, line := range strings.SplitAfter(cmd.String(), "\n") {
		if line != "" {
			plan.WriteString("        " + line)
		}
	}
	plan.WriteString(`  - {id: wait, uses: wait, needs: [make], with: {interval: 100ms}}
  - {id: upload, uses: upload-s3, needs: [wait], with: {from: "~/r", to: "file://${{ plan.dir }}/up"}}
finally:
  - {id: teardown, uses: delete}
`)
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(plan.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	taoflowChild(t, dir, "validate", "big.yaml")
	taoflowChild(t, dir, "apply", "--output", "plain", "big.yaml")

	want := ""
	if bigCommand {
		want = text.String()
	}
	got, err := os.ReadFile(filepath.Join(dir, "up", "big.txt"))
	if err != nil || !bytes.Equal(got, []byte(want)) {
		t.Errorf("up/big.txt: %d bytes (%v), want the command's %d bytes byte for byte", len(got), err, len(want))
	}
	mf, err := os.ReadFile(filepath.Join(dir, "up", "taoflow-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bigManifest && len(mf) <= 128<<10 {
		t.Errorf("the manifest is %d bytes; the test wants one over 128 KiB", len(mf))
	}
	var m struct {
		SHA256 map[string]string `json:"sha256"`
	}
	if err := json.Unmarshal(mf, &m); err != nil || len(m.SHA256) != files+1 {
		t.Errorf("manifest: %d sha256 entries (%v), want %d", len(m.SHA256), err, files+1)
	}
}

// TestContainerWordLimit: a container's command is the arguments of
// docker run (the image may have no shell to read a script), so one word
// over the kernel's 128 KiB is refused at validate and plan, before
// anything is created, with the limit named — not by docker run after
// the instance is up. A word just under the limit passes.
func TestContainerWordLimit(t *testing.T) {
	dir := t.TempDir()
	plan := `taoflow: 1
name: words
vars: {blob: ""}
instances: {gpu: {}}
steps:
  - id: train
    uses: run
    with:
      image: example.com/trainer:1
      command: trainer --config ${{ vars.blob }}
  - {id: wait, uses: wait, needs: [train]}
`
	if err := os.WriteFile(filepath.Join(dir, "words.yaml"), []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"over": 130 << 10, "under": 100 << 10} {
		vf := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(vf, []byte("blob: "+strings.Repeat("a", n)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"validate", "plan"} {
			if name == "under" {
				taoflowChild(t, dir, cmd, "--var-file", vf, "words.yaml")
				continue
			}
			c := taoflowChildExit(t, dir, 2, cmd, "--var-file", vf, "words.yaml")
			if !strings.Contains(c.err, "words.yaml:10:") || !strings.Contains(c.err, "MAX_ARG_STRLEN") {
				t.Errorf("%s with a 130 KiB word: stderr %s; want the error at with.command naming the limit", cmd, tail(c.err, 600))
			}
		}
	}
}
