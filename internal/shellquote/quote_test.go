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
		"leading equals":   {"=x", "=x"},
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
		"assignment":       {"PATH=/tmp", "'PATH=/tmp'"},
		"not a name":       {"tao-job=x", "tao-job=x"},
		"dotted key":       {"train.lr=0.1", "train.lr=0.1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestQuoteFirstWord: a value that reads as an assignment stays the
// command word instead of setting a variable for the words after it.
func TestQuoteFirstWord(t *testing.T) {
	for _, sh := range shells {
		out, _ := exec.Command(sh, "-c", Quote("A=b")+" printf ran 2>/dev/null").Output()
		if string(out) == "ran" {
			t.Errorf("%s ran `%s printf ran` as an assignment and a command", sh, Quote("A=b"))
		}
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
		"*", "~", "-n", "--", "%s", "\\", "\n", "\t", "a\"b", "é\xff", "!", "#x", "A=b",
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
