package steps

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScriptPrelude: every parameter reaches the script as the exact
// value, one word, whatever it holds (quotes, newlines, $(…), globs).
func TestScriptPrelude(t *testing.T) {
	hostile := map[string]string{
		"a": "plain",
		"b": "it's \"quoted\" $(touch /tmp/pwned) `id` ; rm -rf ~",
		"c": "two\nlines\tand * globs",
		"d": "",
		"e": "-n",
	}
	body := script(Params(hostile)) + `printf '%s\0' "$a" "$b" "$c" "$d" "$e"`
	out, err := exec.Command("sh", "-c", body).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		if got[i] != hostile[k] {
			t.Errorf("%s = %q, want %q", k, got[i], hostile[k])
		}
	}
}

// TestScriptBadParam: a parameter name the shell would read differently
// (an upper-case one may be the shell's own, like PATH or IFS) panics.
func TestScriptBadParam(t *testing.T) {
	for _, name := range []string{"PATH", "IFS", "a-b", "1x", "x y", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("script(Params{%q: …}) did not panic", name)
				}
			}()
			script(Params{name: "v"})
		}()
	}
}

// TestScriptsParse: every embedded script is valid sh (shellcheck in
// `make lint` checks more; this fails without it).
func TestScriptsParse(t *testing.T) {
	names, err := fs.Glob(scriptFS, "scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "scripts/"), ".sh")
		if out, err := exec.Command("sh", "-n", "-c", script(nil, name)).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", n, err, out)
		}
	}
}

// TestWordsRoundTrip: a list passed with words() comes back, through
// eval set --, as the same items, whatever they hold, none run.
func TestWordsRoundTrip(t *testing.T) {
	for name, items := range map[string][]string{
		"none":    nil,
		"plain":   {"a", "b.c", "-d"},
		"hostile": {"it's", "$(touch pwned)", "`touch pwned`", "two\nlines", "", "*", "a b", "--x=1;touch pwned"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command("sh", "-c", script(Params{"tf_list": words(items...)})+`eval "set -- $tf_list"; printf '%s\0' "$#" "$@"`)
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			want := append([]string{strconv.Itoa(len(items))}, items...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
				t.Errorf("an item ran as a command")
			}
		})
	}
}
