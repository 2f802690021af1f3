package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/secret"
)

// Human output is escaped: a matrix value, a node id, a line of job output
// or a message from an instance cannot drive the user's terminal (move the
// cursor, retitle the window, rewrite what was printed, hide text). C0
// controls but tab (and newline where a text may span lines), DEL, C1
// controls and bytes that are not UTF-8 are shown as \xNN or \uNNNN. JSON
// output is not escaped here: its string escaping already covers controls.

// escapeControls escapes s for one field of a line: newlines too.
func escapeControls(s string) string { return escapeTerminal(s, false) }

// escapeText escapes s, keeping its newlines.
func escapeText(s string) string { return escapeTerminal(s, true) }

func escapeTerminal(s string, keepNewline bool) string {
	needs := func(r rune) bool {
		return (r < 0x20 && r != '\t' && (r != '\n' || !keepNewline)) || r == 0x7f || (r >= 0x80 && r <= 0x9f)
	}
	clean := utf8.ValidString(s)
	for _, r := range s {
		if !clean || needs(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && needs(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needs(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeWriter escapes (escapeText) each write on its own way to w. The
// writers it is given write whole lines, so no character spans two writes.
type escapeWriter struct{ w io.Writer }

func (e escapeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escapeText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactedView redacts what an event says before a view sees it: the
// live view cuts lines to the terminal's width, and a cut made before the
// output's redaction would leave a secret's prefix unmatched.
type redactedView struct {
	applyView
	red *secret.Redactor
}

func (r redactedView) Event(e engine.Event) {
	e.Message = r.red.Redact(e.Message)
	r.applyView.Event(e)
}
