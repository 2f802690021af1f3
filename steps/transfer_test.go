package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/local"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// xfer is an instance to send to and fetch from, with the steps of run r1
// of a plan in planDir.
type xfer struct {
	steps   *Steps
	inst    platform.Instance
	home    string // the instance's HOME, as a path on this host
	planDir string // the plan's directory: the laptop side
}

// xferRigs returns a local sandbox and a real sshd's sandbox, each with a
// plan directory of its own.
func xferRigs(parent *testing.T) map[string]func(t *testing.T) xfer {
	var srv *sshtest.Server
	n := 0
	return map[string]func(t *testing.T) xfer{
		"local": func(t *testing.T) xfer {
			l := local.New(t.TempDir())
			inst, err := l.Create(context.Background(), "r1", platform.Spec{Name: "a"})
			if err != nil {
				t.Fatal(err)
			}
			return newXfer(t, l, inst, inst.Ref)
		},
		"ssh": func(t *testing.T) xfer {
			if srv == nil {
				srv = sshtest.Start(parent)
			}
			n++
			alias := fmt.Sprintf("box%d", n)
			home, err := srv.AddSandbox(alias)
			if err != nil {
				t.Fatal(err)
			}
			s := ssh.New(ssh.Config{Run: "r1", ConfigFile: srv.ConfigFile})
			t.Cleanup(func() { _ = s.Close() })
			return newXfer(t, s, platform.Instance{Name: "box", Ref: alias}, home)
		},
	}
}

func newXfer(t *testing.T, pf platform.Platform, inst platform.Instance, home string) xfer {
	dir := t.TempDir()
	p := &plan.Plan{File: filepath.Join(dir, "plan.yaml"), Name: "xfer", Hash: "h1"}
	return xfer{steps: New(Config{Platform: pf, RunID: "r1", Plan: p, PollInterval: tick}), inst: inst, home: home, planDir: dir}
}

func (x xfer) do(ctx context.Context, kind string, w *plan.Value) (*logBuf, error) {
	log := &logBuf{}
	err := x.steps.Do(ctx, Request{NodeID: kind + "@a", Step: &plan.Step{ID: kind, Uses: kind}, Instance: x.inst, With: w, Log: log})
	return log, err
}

// trickyTree is a tree with names holding spaces, quotes and a newline,
// an empty file and directory, a link inside and a link out, and one file
// over 1 MiB.
var trickyTree = map[string]string{
	"spec.yaml":            "model: changenet\n",
	"dir/a b.txt":          "space",
	"dir/quo'te\"s.txt":    "quotes",
	"dir/new\nline.txt":    "newline",
	"empty":                "",
	"skip.tmp":             "excluded",
	"sub/deep/weights.bin": strings.Repeat("w", 5000),
	// Large enough for send to splice it into the archive (spliceMin),
	// of an odd size (padded to a block), with a small file after it.
	"sub/deep/big.bin": strings.Repeat("0123456789abcdef", spliceMin/16) + "odd",
}

func writeTricky(t *testing.T, dir string) {
	t.Helper()
	writeTree(t, dir, trickyTree)
	if err := os.MkdirAll(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"dir/link": "a b.txt", "outside": "/etc/hostname"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTricky checks that dir holds trickyTree less skip.tmp, with its
// links as links.
func checkTricky(t *testing.T, dir string) {
	t.Helper()
	for name, content := range trickyTree {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if name == "skip.tmp" {
			if err == nil {
				t.Errorf("%s was copied although excluded", name)
			}
			continue
		}
		if err != nil || string(got) != content {
			t.Errorf("%q: %q, %v; want %q", name, got, err, content)
		}
	}
	for link, target := range map[string]string{"dir/link": "a b.txt", "outside": "/etc/hostname"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
			t.Errorf("%s: a link to %q, %v; want a link to %q (links are copied as links)", link, got, err, target)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "emptydir")); err != nil || !fi.IsDir() {
		t.Errorf("emptydir: %v", err)
	}
}

// TestSendFetch sends a tree with awkward names to an instance and fetches
// it back, over the local and the ssh platform: verified, links kept as
// links, excludes left out; a second send or fetch of the same tree
// transfers nothing; a changed tree replaces the old copy as a whole.
func TestSendFetch(t *testing.T) {
	for name, mk := range xferRigs(t) {
		t.Run(name, func(t *testing.T) {
			x := mk(t)
			ctx := context.Background()
			writeTricky(t, filepath.Join(x.planDir, "specs"))
			sendWith := with("from", "specs/", "to", "~/specs", "exclude", []string{"*.tmp"})
			log, err := x.do(ctx, plan.KindSend, sendWith)
			if err != nil {
				t.Fatalf("send: %v\n%s", err, log)
			}
			if !strings.Contains(log.String(), "verified") {
				t.Errorf("the send log does not say it verified the copy:\n%s", log)
			}
			checkTricky(t, filepath.Join(x.home, "specs"))

			log, err = x.do(ctx, plan.KindSend, sendWith)
			if err != nil || !strings.Contains(log.String(), "nothing to send") {
				t.Errorf("a second send of the same tree: %v\n%s", err, log)
			}

			// A changed tree: the copy is replaced as a whole.
			writeTree(t, filepath.Join(x.planDir, "specs"), map[string]string{"spec.yaml": "model: changed, longer\n"})
			if err := os.Remove(filepath.Join(x.planDir, "specs", "empty")); err != nil {
				t.Fatal(err)
			}
			if log, err = x.do(ctx, plan.KindSend, sendWith); err != nil || strings.Contains(log.String(), "nothing to send") {
				t.Fatalf("send of a changed tree: %v\n%s", err, log)
			}
			if b, _ := os.ReadFile(filepath.Join(x.home, "specs", "spec.yaml")); string(b) != "model: changed, longer\n" {
				t.Errorf("spec.yaml after the second send: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(x.home, "specs", "empty")); err == nil {
				t.Errorf("a file removed here is still in the copy")
			}
			if left, _ := filepath.Glob(filepath.Join(x.home, ".taoflow-send.*")); len(left) > 0 {
				t.Errorf("temporary directories left on the instance: %v", left)
			}

			// Fetch it back.
			fetchWith := with("from", "~/specs", "to", "out/specs")
			log, err = x.do(ctx, plan.KindFetch, fetchWith)
			if err != nil {
				t.Fatalf("fetch: %v\n%s", err, log)
			}
			out := filepath.Join(x.planDir, "out", "specs")
			if b, _ := os.ReadFile(filepath.Join(out, "spec.yaml")); string(b) != "model: changed, longer\n" {
				t.Errorf("fetched spec.yaml: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "dir", "new\nline.txt")); string(b) != "newline" {
				t.Errorf("fetched a name with a newline: %q", b)
			}
			if got, err := os.Readlink(filepath.Join(out, "dir", "link")); err != nil || got != "a b.txt" {
				t.Errorf("fetched link: %q, %v", got, err)
			}
			if _, err := os.Lstat(filepath.Join(out, "outside")); err == nil {
				t.Errorf("the link to /etc/hostname was fetched: fetch makes no link that leaves the tree")
			}
			var m Manifest
			b, err := os.ReadFile(filepath.Join(out, manifestName))
			if err != nil || json.Unmarshal(b, &m) != nil {
				t.Fatalf("%s next to the results: %v\n%s", manifestName, err, b)
			}
			if m.Files != 6 || m.RunID != "r1" || m.Plan != "xfer" || m.SHA256["spec.yaml"] == "" || m.From != "~/specs" || m.LinksLeftOut["outside"] != "/etc/hostname" {
				t.Errorf("manifest: %+v", m)
			}
			if left, _ := filepath.Glob(filepath.Join(x.planDir, "out", ".taoflow-fetch-*")); len(left) > 0 {
				t.Errorf("temporary directories left here: %v", left)
			}
			log, err = x.do(ctx, plan.KindFetch, fetchWith)
			if err != nil || !strings.Contains(log.String(), "nothing to fetch") {
				t.Errorf("a second fetch of the same tree: %v\n%s", err, log)
			}
		})
	}
}

// TestSendFile sends one file, named with a space, by an absolute path.
func TestSendFile(t *testing.T) {
	x := xferRigs(t)["local"](t)
	src := filepath.Join(x.planDir, "my spec.yaml")
	writeTree(t, x.planDir, map[string]string{"my spec.yaml": "a: 1\n"})
	if log, err := x.do(context.Background(), plan.KindSend, with("from", src, "to", "~/cfg/spec.yaml")); err != nil {
		t.Fatalf("send: %v\n%s", err, log)
	}
	if b, err := os.ReadFile(filepath.Join(x.home, "cfg", "spec.yaml")); err != nil || string(b) != "a: 1\n" {
		t.Errorf("the file sent: %q, %v", b, err)
	}
}

// mountSmall mounts a tmpfs of 256 KiB at dir (the tests run as root, as
// in CI), to fill a disk.
func mountSmall(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// TestTransferBadInput: each bad input is a clear error, and nothing is
// left half-written under the destination's name.
func TestTransferBadInput(t *testing.T) {
	big := map[string]string{"big.bin": strings.Repeat("x", 1<<20)}
	tests := map[string]struct {
		setup     func(t *testing.T, x xfer)
		kind      string
		with      *plan.Value
		wantClass string
		wantMsg   string
		absent    func(x xfer) string // must not exist afterwards
	}{
		"send: from missing": {
			kind: plan.KindSend, with: with("from", "nope/", "to", "~/specs"),
			wantClass: ClassSendFailed, wantMsg: "does not exist on this machine",
			absent: func(x xfer) string { return filepath.Join(x.home, "specs") },
		},
		"send: destination not writable": {
			setup: func(t *testing.T, x xfer) {
				writeTree(t, x.planDir, map[string]string{"specs/a": "a"})
				writeTree(t, x.home, map[string]string{"blocker": "a file"})
			},
			kind: plan.KindSend, with: with("from", "specs", "to", "~/blocker/specs"),
			wantClass: ClassSendFailed, wantMsg: "cannot be written",
		},
		"send: the instance's disk is full": {
			setup: func(t *testing.T, x xfer) {
				writeTree(t, filepath.Join(x.planDir, "data"), big)
				mountSmall(t, filepath.Join(x.home, "full"))
			},
			kind: plan.KindSend, with: with("from", "data", "to", "~/full/data"),
			wantClass: ClassSendFailed, wantMsg: "the instance's disk is full",
			absent: func(x xfer) string { return filepath.Join(x.home, "full", "data") },
		},
		"send: a whole home": {
			setup: func(t *testing.T, x xfer) { writeTree(t, x.planDir, map[string]string{"specs/a": "a"}) },
			kind:  plan.KindSend, with: with("from", "specs", "to", "~/"),
			wantClass: ClassInvalidConfig, wantMsg: "would replace a whole home",
		},
		"fetch: from missing": {
			kind: plan.KindFetch, with: with("from", "~/results", "to", "out"),
			wantClass: ClassFetchFailed, wantMsg: "is not a directory",
			absent: func(x xfer) string { return filepath.Join(x.planDir, "out") },
		},
		"fetch: destination not writable": {
			setup: func(t *testing.T, x xfer) {
				writeTree(t, x.home, map[string]string{"results/a": "a"})
				writeTree(t, x.planDir, map[string]string{"blocker": "a file"})
			},
			kind: plan.KindFetch, with: with("from", "~/results", "to", "blocker/out"),
			wantClass: ClassFetchFailed, wantMsg: "cannot create",
		},
		"fetch: this machine's disk is full": {
			setup: func(t *testing.T, x xfer) {
				writeTree(t, filepath.Join(x.home, "results"), big)
				mountSmall(t, filepath.Join(x.planDir, "full"))
				writeTree(t, filepath.Join(x.planDir, "full", "out"), map[string]string{"old": "kept"})
			},
			kind: plan.KindFetch, with: with("from", "~/results", "to", "full/out", "replace", true),
			wantClass: ClassFetchFailed, wantMsg: "this machine's disk is full",
			absent: func(x xfer) string { return filepath.Join(x.planDir, "full", "out", "big.bin") },
		},
	}
	rigs := xferRigs(t)
	for _, rig := range []string{"local", "ssh"} {
		for name, tt := range tests {
			t.Run(rig+"/"+name, func(t *testing.T) {
				x := rigs[rig](t)
				if tt.setup != nil {
					tt.setup(t, x)
				}
				log, err := x.do(context.Background(), tt.kind, tt.with)
				if err == nil {
					t.Fatalf("no error\n%s", log)
				}
				e := stepError(t, err)
				if e.Class != tt.wantClass || !strings.Contains(e.Msg, tt.wantMsg) {
					t.Errorf("error %q; want class %q with %q", err, tt.wantClass, tt.wantMsg)
				}
				if tt.absent != nil {
					if _, err := os.Lstat(tt.absent(x)); err == nil {
						t.Errorf("%s exists after the failure", tt.absent(x))
					}
				}
				for _, dir := range []string{x.home, filepath.Join(x.home, "full"), x.planDir, filepath.Join(x.planDir, "full")} {
					if left, _ := filepath.Glob(filepath.Join(dir, ".taoflow-*")); len(left) > 0 {
						t.Errorf("temporary directories left: %v", left)
					}
				}
				if b, err := os.ReadFile(filepath.Join(x.planDir, "full", "out", "old")); tt.kind == plan.KindFetch && strings.Contains(name, "full") && string(b) != "kept" {
					t.Errorf("the destination's old content: %q, %v; want it kept", b, err)
				}
			})
		}
	}
}

// TestTransferInterrupted cancels a send and a fetch in the middle of the
// stream (as Ctrl-C does): the destination keeps what it held, with no
// partial file under its name.
func TestTransferInterrupted(t *testing.T) {
	files := map[string]string{"a.bin": strings.Repeat("a", 100000), "b.bin": strings.Repeat("b", 100000), "c.bin": "c"}
	for name, mk := range xferRigs(t) {
		t.Run(name+"/send", func(t *testing.T) {
			x := mk(t)
			writeTree(t, filepath.Join(x.planDir, "data"), files)
			writeTree(t, filepath.Join(x.home, "data"), map[string]string{"old": "kept"})
			ctx, cancel := context.WithCancelCause(context.Background())
			interrupt := errors.New("interrupted (Ctrl-C)")
			testHookSent = func(string) { cancel(interrupt) }
			t.Cleanup(func() { testHookSent = nil })
			_, err := x.do(ctx, plan.KindSend, with("from", "data", "to", "~/data"))
			if !errors.Is(err, interrupt) {
				t.Fatalf("send: %v; want the interruption", err)
			}
			entries, _ := os.ReadDir(filepath.Join(x.home, "data"))
			if len(entries) != 1 || entries[0].Name() != "old" {
				t.Errorf("~/data after the interrupted send: %v; want only its old file", entries)
			}
		})
		t.Run(name+"/fetch", func(t *testing.T) {
			x := mk(t)
			writeTree(t, filepath.Join(x.home, "results"), files)
			writeTree(t, filepath.Join(x.planDir, "out"), map[string]string{"old": "kept"})
			ctx, cancel := context.WithCancelCause(context.Background())
			interrupt := errors.New("interrupted (Ctrl-C)")
			testHookFetched = func(string) { cancel(interrupt) }
			t.Cleanup(func() { testHookFetched = nil })
			_, err := x.do(ctx, plan.KindFetch, with("from", "~/results", "to", "out", "replace", true))
			if !errors.Is(err, interrupt) {
				t.Fatalf("fetch: %v; want the interruption", err)
			}
			entries, _ := os.ReadDir(filepath.Join(x.planDir, "out"))
			if len(entries) != 1 || entries[0].Name() != "old" {
				t.Errorf("out after the interrupted fetch: %v; want only its old file", entries)
			}
			if left, _ := filepath.Glob(filepath.Join(x.planDir, ".taoflow-fetch-*")); len(left) > 0 {
				t.Errorf("temporary directories left here: %v", left)
			}
		})
	}
}
