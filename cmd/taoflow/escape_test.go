package main

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/secret"
)

// escPlan has job output that holds terminal escape sequences: a
// window-title OSC, a CSI that clears the screen, a C1 CSI. (A matrix
// value holding one is a validate error: hostile-values.txtar.)
const escPlan = `taoflow: 1
name: esc
instances:
  a: {}
steps:
  - id: train
    uses: run
    matrix: {v: [x, y]}
    with:
      command: printf 'job says \033[2J\033]0;owned\007 \302\2332J %s\n' ${{ matrix.v }}
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 50ms}
`

// TestHumanOutputEscaped: terminal controls from job output reach the
// human views (plain apply output, status, logs) only as visible escapes.
func TestHumanOutputEscaped(t *testing.T) {
	t.Chdir(t.TempDir())
	writePlan(t, "esc.yaml", escPlan)
	code, out, errOut := applyCLI(t, "apply", "--output", "plain", "esc.yaml")
	if code != exitOK {
		t.Fatalf("apply exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, `job says \x1b[2J\x1b]0;owned\x07`) {
		t.Errorf("the job's output is not shown escaped:\n%s", out)
	}
	check := func(what, text string) {
		t.Helper()
		if i := strings.IndexFunc(text, func(r rune) bool { return r == 0x1b || r == 0x07 || r == 0x9b }); i >= 0 {
			t.Errorf("%s holds a terminal control at byte %d: %q", what, i, text[max(0, i-20):min(len(text), i+20)])
		}
	}
	check("apply output", out+errOut)
	for _, args := range [][]string{{"status"}, {"status", "latest"}, {"logs", "latest"}} {
		code, out, errOut := applyCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		check(strings.Join(args, " "), out+errOut)
	}
	// status --json escapes as JSON does (no value of the plan can hold a
	// control any more to show it: validate refuses them).
	_, jsonOut, _ := applyCLI(t, "status", "latest", "--json")
	check("status --json", jsonOut)
}

func TestEscapeControls(t *testing.T) {
	tests := map[string]struct{ in, field, text string }{
		"plain":        {"lr=0.1\tok", "lr=0.1\tok", "lr=0.1\tok"},
		"csi":          {"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		"newline":      {"a\nb\r", `a\x0ab\x0d`, "a\nb\\x0d"},
		"c1 and del":   {"a\u009bb\x7f", `a\u009bb\x7f`, `a\u009bb\x7f`},
		"invalid utf8": {"a\x9bb", `a\x9bb`, `a\x9bb`},
		"unicode":      {"naïve €", "naïve €", "naïve €"},
	}
	for name, tt := range tests {
		if got := escapeControls(tt.in); got != tt.field {
			t.Errorf("%s: escapeControls(%q) = %q, want %q", name, tt.in, got, tt.field)
		}
		if got := escapeText(tt.in); got != tt.text {
			t.Errorf("%s: escapeText(%q) = %q, want %q", name, tt.in, got, tt.text)
		}
	}
}

// TestLiveViewRedactsBeforeClip: the live view cuts lines to the
// terminal's width; the events it is given are redacted first, so a secret
// across the cut leaves no prefix on the terminal.
func TestLiveViewRedactsBeforeClip(t *testing.T) {
	const secretValue = "live-s3cr3t-value-0123456789"
	seen := []string{}
	v := redactedView{eventsOnly(func(e engine.Event) { seen = append(seen, e.Message) }), secret.NewRedactor(secretValue)}
	v.Event(engine.Event{Type: engine.NodeLog, Node: "n", Message: strings.Repeat("x", 70) + secretValue})
	if len(seen) != 1 || strings.Contains(seen[0], secretValue[:8]) || !strings.HasSuffix(seen[0], secret.Mask) {
		t.Errorf("the view saw %q", seen)
	}
}

// eventsOnly is an applyView that only takes events.
type eventsOnly func(engine.Event)

func (f eventsOnly) Event(e engine.Event) { f(e) }
func (eventsOnly) Start(applyStart)       {}
func (eventsOnly) Close()                 {}
func (eventsOnly) Outcome(runner.Outcome) {}
