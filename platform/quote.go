package platform

import "strings"

// Quote returns s as one word for a POSIX shell. A non-empty s made only of
// characters that no shell treats specially ([A-Za-z0-9_./:=@%+,-]) is
// returned unchanged; anything else is wrapped in single quotes, each single
// quote inside becoming close-quote, backslash-quote, open-quote, and the
// empty string becomes a pair of single quotes:
//
//	Quote("it's") == `'it'\''s'`
//	Quote("")     == `''`
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafe(s) {
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
