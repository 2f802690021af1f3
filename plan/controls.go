package plan

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/taoflow/taoflow/secret"
)

// Every string of a plan, and every --var and --var-file value, is text a
// person reads: in plan and graph previews, --commands, status, logs. A
// control character in one (an escape sequence "\e]52;…", a carriage
// return, a NUL) could drive the reviewer's terminal — write the
// clipboard, erase the line before it, hide a line of a script — and a NUL
// cannot reach a command or an environment at all. YAML allows them only
// through the escapes of double-quoted strings ("\e", "\x1b", "\0", "\N"),
// so a plan never needs one: validate refuses C0 controls but tab and
// newline, DEL and C1 controls, at their position.

// controlAt returns the byte offset and the rune of the first control
// character of s that a plan may not hold (tab and newline are text), or
// -1. Bytes that are not UTF-8 count as controls (utf8.RuneError).
func controlAt(s string) (int, rune) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return i, r
		case r < 0x20 && r != '\t' && r != '\n', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return i, r
		}
		i += n
	}
	return -1, 0
}

// controlName says which character r is, for a message.
func controlName(r rune) string {
	switch r {
	case 0:
		return "a NUL byte (\\0), which no command or environment variable can hold"
	case 0x1b:
		return "an escape character (ESC, \\e), which starts terminal control sequences"
	case '\r':
		return "a carriage return (\\r), which lets a line overwrite what was printed before it"
	case utf8.RuneError:
		return "a byte that is not UTF-8"
	}
	return fmt.Sprintf("the control character U+%04X", r)
}

// controlFix says why a control character r is refused, and the fix.
func controlFix(r rune) string {
	if r == 0 {
		return "remove it"
	}
	return "a terminal showing the value would obey it (plan, graph, status and logs print values); remove it, or write what it stands for as text"
}

// controls refuses a control character in string scalar v.
func (c *checker) controls(v *Value) {
	if off, r := controlAt(v.Text); off >= 0 {
		c.d.errorf(c.offsetPos(v, off), "the string holds %s: %s", controlName(r), controlFix(r))
	}
}

// keyControls refuses a control character in a mapping key.
func (c *checker) keyControls(f Field) {
	if off, r := controlAt(f.Key); off >= 0 {
		c.d.errorf(f.KeyPos, "the key holds %s: %s", controlName(r), controlFix(r))
	}
}

// checkOverrides checks --var and --var-file values as the plan's own
// strings are checked: a control character (as above) or something that
// looks like a secret is refused. A var is recorded in the run's state and
// shown by status and plan, so a secret given as a var would be kept in
// clear where the plan's secrets never are. The message names the var and
// where it was set, never the value.
func checkOverrides(p *Plan, opts Options, d *diags) {
	names := make([]string, 0, len(opts.Vars))
	for k := range opts.Vars {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		val := opts.Vars[k]
		pos, from := Pos{File: "--var " + k}, "--var "+k
		if src, ok := opts.Sources[k]; ok {
			pos, from = src.Pos, src.From
		}
		if off, r := controlAt(val); off >= 0 {
			d.errorf(pos, "%s: the value of var %q holds, at byte %d, %s: %s", from, k, off, controlName(r), controlFix(r))
			continue
		}
		if fs := secret.Lint(val); len(fs) > 0 {
			d.errorf(pos, "%s: the value of var %q looks like %s; a var is recorded in the run's state and shown by plan and status, so a secret never goes in one: declare it in the plan under secrets:, set it in taoflow's environment and write ${{ secrets.NAME }}", from, k, secretKind(fs[0].Kind))
		}
	}
}

// secretKind says what a secret.Lint finding is without quoting it.
func secretKind(kind string) string {
	switch kind {
	case secret.KindNGCKey:
		return "an NGC API key"
	case secret.KindAWSKeyID:
		return "an AWS access key id"
	case secret.KindHFToken:
		return "a Hugging Face token"
	case secret.KindGitHubToken:
		return "a GitHub token"
	case secret.KindSecretKey:
		return "a secret API key"
	case secret.KindSlackToken:
		return "a Slack token"
	case secret.KindPrivateKey:
		return "a private key"
	case secret.KindAssignment:
		return "a secret assigned to a name (NAME_TOKEN=…)"
	case secret.KindURLPassword:
		return "a URL with a password"
	}
	return "a secret (a random-looking string)"
}
