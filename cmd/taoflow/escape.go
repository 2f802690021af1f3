package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escapeControls makes text safe to print on a terminal: C0 controls
// (except tab), DEL and C1 controls become visible escapes (\x1b,
// \u009b), and so does a byte that is not UTF-8, so a matrix value or a
// line of job output cannot move the cursor, retitle the window or hide
// text. Newlines are escaped too: a human line stays one line. JSON
// output does not need this; its string escaping covers controls.
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
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
		case r < 0x80 && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether r is a control a terminal acts on, or the
// replacement for a byte that is not UTF-8.
func needsEscape(r rune) bool {
	return (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError
}
