package state

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFileName(t *testing.T) {
	safe := regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`)
	ids := []string{
		"train", "train[lr=0.1,bs=32]@gpu0", "train[lr=0.1,bs=32]@gpu1", "train_lr_0.1_bs_32__gpu0",
		"a/b", "a_b", "a\\b", "..", ".", "", ".hidden", "_hidden", "ünï", "x y", strings.Repeat("n", 300),
		strings.Repeat("n", 300) + "x",
	}
	seen := map[string]string{}
	for _, id := range ids {
		name := fileName(id)
		if !safe.MatchString(name) || len(name) > maxNameLen+13 {
			t.Errorf("fileName(%q) = %q: not a safe file name", id, name)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("fileName(%q) = fileName(%q) = %q", id, prev, name)
		}
		seen[name] = id
	}
	if got := fileName("train-3.log_x"); got != "train-3.log_x" {
		t.Errorf("fileName of a safe id = %q, want it unchanged", got)
	}
}

func readLog(t *testing.T, s *Store, run, node string) string {
	t.Helper()
	f, err := s.OpenLog(run, node)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLogs(t *testing.T) {
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	mustCreateRun(t, s, "r2")
	nodes := []string{"train[lr=0.1]@gpu0", "train[lr=0.2]@gpu0", "a/../../escape"}
	for i, n := range nodes {
		if err := s.AppendLog("r1", n, []byte(fmt.Sprintf("line %d\n", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendLog("r1", nodes[0], []byte("second\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog("r2", "other", []byte("x\n")); err != nil {
		t.Fatal(err)
	}

	got, err := s.LogNodes("r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nodes, got); diff != "" {
		t.Errorf("LogNodes (-want +got):\n%s", diff)
	}
	if got := readLog(t, s, "r1", nodes[0]); got != "line 0\nsecond\n" {
		t.Errorf("log of %s = %q", nodes[0], got)
	}
	if got := readLog(t, s, "r1", nodes[2]); got != "line 2\n" {
		t.Errorf("log of %s = %q", nodes[2], got)
	}
	for _, n := range nodes {
		p := s.LogPath("r1", n)
		if filepath.Dir(p) != filepath.Join(s.dir, "runs", "r1", "logs") {
			t.Errorf("LogPath(r1, %q) = %s, outside the run's log directory", n, p)
		}
	}
}

// TestLogLines checks that AppendLog writes whole lines, so that a secret
// written in two pieces still reaches the redactor in one.
func TestLogLines(t *testing.T) {
	redact := func(v string) string { return strings.ReplaceAll(v, "s3cr3t", "***") }
	tests := map[string]struct {
		chunks []string
		flush  bool
		want   string
	}{
		"split secret":      {chunks: []string{"token=s3c", "r3t ok\n"}, want: "token=*** ok\n"},
		"split at newline":  {chunks: []string{"a s3c", "r3t\nb s3", "cr3t\n"}, want: "a ***\nb ***\n"},
		"carriage return":   {chunks: []string{"epoch 1 s3cr", "3t\repoch 2\r"}, want: "epoch 1 ***\repoch 2\r"},
		"unfinished held":   {chunks: []string{"done\n", "partial s3cr3t"}, want: "done\n"},
		"unfinished flush":  {chunks: []string{"done\n", "partial s3c", "r3t"}, flush: true, want: "done\npartial ***"},
		"flush with none":   {chunks: []string{"done\n"}, flush: true, want: "done\n"},
		"long line written": {chunks: []string{strings.Repeat("x", maxPending)}, want: strings.Repeat("x", maxPending)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := openTest(t, WithRedactor(redact))
			mustCreateRun(t, s, "r1")
			for _, c := range tc.chunks {
				if err := s.AppendLog("r1", "n", []byte(c)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.flush {
				if err := s.FlushLog("r1", "n"); err != nil {
					t.Fatal(err)
				}
			}
			if got := readLog(t, s, "r1", "n"); got != tc.want {
				t.Errorf("log = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLogCloseFlushes checks that Close writes out an unfinished line.
func TestLogCloseFlushes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustCreateRun(t, s, "r1")
	if err := s.AppendLog("r1", "n", []byte("no newline")); err != nil {
		t.Fatal(err)
	}
	path := s.LogPath("r1", "n")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "no newline" {
		t.Errorf("log after Close = %q, want %q", b, "no newline")
	}
	if err := s.AppendLog("r1", "m", []byte("x\n")); err == nil {
		t.Error("AppendLog after Close succeeded")
	}
}

// TestLogConcurrentAppends has many goroutines append whole lines to the
// same and to different logs; every line must arrive once and intact.
func TestLogConcurrentAppends(t *testing.T) {
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("n%d", w%2) // four writers per log
			for i := range lines {
				if err := s.AppendLog("r1", node, []byte(fmt.Sprintf("w%d line %d\n", w, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for n := range 2 {
		got := strings.SplitAfter(readLog(t, s, "r1", fmt.Sprintf("n%d", n)), "\n")
		var want []string
		for w := n; w < writers; w += 2 {
			for i := range lines {
				want = append(want, fmt.Sprintf("w%d line %d\n", w, i))
			}
		}
		want = append(want, "") // after the last newline
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lines of log n%d (-want +got):\n%s", n, diff)
		}
	}
	nodes, err := s.LogNodes("r1")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(nodes)
	if diff := cmp.Diff([]string{"n0", "n1"}, nodes); diff != "" {
		t.Errorf("LogNodes (-want +got):\n%s", diff)
	}
}
