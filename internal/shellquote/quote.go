// Package shellquote writes a string as one POSIX shell word. It is the one
// place taoflow quotes for a shell: substituted ${{ }} values in commands,
// the scripts the steps send to instances, and the ssh and brev transports
// all go through Quote, so the "a value arrives as one word" promise rests
// on this file and its fuzz target alone. It imports only the standard
// library.
package shellquote

import "strings"

// Quote returns s as one word for a POSIX shell. A non-empty s made only of
// characters that no shell treats specially ([A-Za-z0-9_./:=@%+,-]) is
// returned unchanged, unless it reads as an assignment (NAME=…, which in a
// command's first word would set NAME instead of running a command);
// anything else is wrapped in single quotes, each single
// quote inside becoming close-quote, backslash-quote, open-quote, and the
// empty string becomes a pair of single quotes:
//
//	Quote("it's") == `'it'\''s'`
//	Quote("")     == `''`
//
// The word is one word only where the shell reads it as a word: not inside
// quotes, a heredoc, a comment or after a backslash (package plan refuses
// expressions there).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafe(s) && !isAssignment(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_./:=@%+,-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isAssignment reports whether s starts with NAME= (NAME a shell variable
// name), which the shell reads as an assignment in a command's first word.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
