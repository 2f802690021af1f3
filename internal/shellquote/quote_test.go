package shellquote

import (
	"os/exec"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"empty":            {"", "''"},
		"plain":            {"abc", "abc"},
		"all safe chars":   {"A-z_0.9/:=@%+,", "A-z_0.9/:=@%+,"},
		"leading dash":     {"-n", "-n"},
		"space":            {"a b", "'a b'"},
		"single quote":     {"it's", `'it'\''s'`},
		"only quote":       {"'", `''\'''`},
		"dollar":           {"$HOME", "'$HOME'"},
		"command subst":    {"$(rm -rf /)", "'$(rm -rf /)'"},
		"backtick":         {"`id`", "'`id`'"},
		"glob":             {"*", "'*'"},
		"tilde":            {"~/x", "'~/x'"},
		"newline":          {"a\nb", "'a\nb'"},
		"backslash":        {`a\b`, `'a\b'`},
		"double quote":     {`"x"`, `'"x"'`},
		"semicolon":        {"a;b", "'a;b'"},
		"non-ascii":        {"é", "'é'"},
		"brace expansion?": {"{a,b}", "'{a,b}'"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// shells are the shells the fuzz target reads quoted words back with.
var shells = func() []string {
	out := []string{"/bin/sh"}
	if p, err := exec.LookPath("bash"); err == nil {
		out = append(out, p)
	}
	return out
}()

// FuzzQuote checks that sh and bash read Quote(s) back as exactly s, also
// between two other words.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{
		"", "a", "a b", "it's", "'", "''", `'\''`, "$(id)", "`id`", "${X:-y}",
		"*", "~", "-n", "--", "%s", "\\", "\n", "\t", "a\"b", "é\xff", "!", "#x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a NUL cannot be in an argv word at all
		}
		for _, sh := range shells {
			out, err := exec.Command(sh, "-c", "printf '%s|' a "+Quote(s)+" b").Output()
			if err != nil {
				t.Fatalf("%s -c printf %%s %s: %v", sh, Quote(s), err)
			}
			if want := "a|" + s + "|b|"; string(out) != want {
				t.Errorf("Quote(%q) = %s; %s read back %q, want %q", s, Quote(s), sh, out, want)
			}
		}
	})
}
