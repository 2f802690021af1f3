package plan

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A container's command: the words its instance's shell splits into docker
// run's arguments, and nothing more (CheckContainerArgv).

// CheckContainerArgv checks a container's command: text that the
// instance's shell splits into the container's arguments after `docker run
// … image`. That shell must do nothing but split words: no command
// separators, redirections or subshells (they would run on the instance,
// not in the container), no $ or ` expansion (it would expand the
// instance's variables, secrets included, onto docker's command line), no
// leading ~ or #, and no backslash-escaped metacharacter (\; \| \$ …: shell
// code dressed as data, which an entrypoint that runs its arguments
// through a shell runs; quote text that is meant as text). Quotes and
// backslashes before other characters work as in sh; globbing is off
// where it runs (set -f). The command is read with the same shell parser
// as validate's expression check.
func CheckContainerArgv(cmd string) error {
	if p := argvProblem(cmd); p != nil {
		return errors.New(p.Msg)
	}
	return nil
}

// argvProblem finds the first thing in a container command that is more
// than words, at a byte offset of cmd.
func argvProblem(cmd string) *shellProblem {
	const lead = "docker run " // the command's words follow docker's
	n := len(lead)
	if t := strings.TrimRight(cmd, "\\"); (len(cmd)-len(t))%2 == 1 {
		return &shellProblem{Offset: len(cmd) - 1, Msg: "a trailing backslash"}
	}
	f, err := parseShell(lead+cmd, syntax.LangPOSIX)
	if err != nil {
		off, msg := shellErrorOffset(err)
		if strings.Contains(msg, "closing quote") {
			msg = "a quote is not closed"
		}
		if o := off - n; o >= 0 && o < len(cmd) && strings.IndexByte(";&|<>()", cmd[o]) >= 0 {
			return argvSyntax(cmd, o)
		}
		return &shellProblem{Offset: min(max(off-n, 0), len(cmd)), Msg: msg}
	}
	at := func(off int) *shellProblem {
		off = min(max(off-n, 0), max(len(cmd)-1, 0))
		return argvSyntax(cmd, off)
	}
	comment := func(off int) *shellProblem {
		return &shellProblem{Offset: max(off-n, 0), Msg: "a word starting with '#' is a comment to the instance's shell; quote it"}
	}
	if len(f.Stmts) == 0 {
		if len(f.Last) > 0 {
			return comment(int(f.Last[0].Hash.Offset()))
		}
		return nil
	}
	if len(f.Stmts) > 1 {
		if st := f.Stmts[0]; st.Semicolon.IsValid() {
			return at(int(st.Semicolon.Offset()))
		}
		// The separator is the last non-blank before the second command.
		i := int(f.Stmts[1].Pos().Offset()) - 1
		for i > n && ((lead + cmd)[i] == ' ' || (lead + cmd)[i] == '\t') {
			i--
		}
		return at(i)
	}
	st := f.Stmts[0]
	switch {
	case len(st.Comments) > 0:
		return comment(int(st.Comments[0].Hash.Offset()))
	case len(f.Last) > 0:
		return comment(int(f.Last[0].Hash.Offset()))
	case st.Semicolon.IsValid():
		return at(int(st.Semicolon.Offset()))
	case st.Background || st.Coprocess:
		return at(int(st.End().Offset()) - 1)
	case len(st.Redirs) > 0:
		return at(int(st.Redirs[0].OpPos.Offset()))
	}
	var call *syntax.CallExpr
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		call = c
	case *syntax.BinaryCmd:
		return at(int(c.OpPos.Offset()))
	default:
		return at(int(st.Cmd.Pos().Offset()))
	}
	for k, w := range call.Args {
		if k == 0 {
			continue // the lead
		}
		for j, part := range w.Parts {
			if p := argvPart(part, j == 0, n, at); p != nil {
				return p
			}
		}
		if l := wordLen(w); l > MaxArg {
			return &shellProblem{Offset: int(w.Pos().Offset()) - n, Msg: fmt.Sprintf("this word of the container's command is %d KiB once the instance's shell unquotes it; the kernel passes no argument longer than %d KiB (MAX_ARG_STRLEN) to docker run: send the data as a file (send, or a volume) and name the file", l>>10, (MaxArg+1)>>10)}
		}
	}
	return nil
}

// MaxArg is the longest argument, in bytes, that Linux passes to a
// program (MAX_ARG_STRLEN, 128 KiB with its terminating NUL). A container's
// command is the arguments of docker run (an image may have no shell to
// read a script from), so each of its words must fit; a `run` without
// image reads its command as a script (platform.MaxScript).
const MaxArg = 128<<10 - 1

// wordLen is the length of w once a shell removes its quotes (the words
// argvProblem accepts: literals, single- and double-quoted text).
func wordLen(w *syntax.Word) int {
	l := 0
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.SglQuoted:
			l += len(p.Value)
		case *syntax.Lit:
			l += len(p.Value) - strings.Count(p.Value, "\\")
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if lit, ok := q.(*syntax.Lit); ok {
					l += len(lit.Value)
				}
			}
		}
	}
	return l
}

func argvPart(part syntax.WordPart, first bool, n int, at func(int) *shellProblem) *shellProblem {
	off := int(part.Pos().Offset())
	switch p := part.(type) {
	case *syntax.SglQuoted:
		if p.Dollar {
			return at(off)
		}
		return nil
	case *syntax.Lit:
		if first && strings.HasPrefix(p.Value, "~") {
			return &shellProblem{Offset: off - n, Msg: "a word starting with '~' means the instance's home to its shell; quote it"}
		}
		if e := escapedMeta(p.Value, off-n); e != nil {
			return e
		}
		if i := unescaped(p.Value, '$'); i >= 0 {
			return at(off + i)
		}
		return nil
	case *syntax.DblQuoted:
		if p.Dollar {
			return at(off)
		}
		for _, q := range p.Parts {
			lit, ok := q.(*syntax.Lit)
			if !ok {
				c := "$"
				if cs, ok := q.(*syntax.CmdSubst); ok && cs.Backquotes {
					c = "`"
				}
				return &shellProblem{Offset: int(q.Pos().Offset()) - n, Msg: fmt.Sprintf("'%s' inside double quotes would be expanded by the instance's shell; use single quotes", c)}
			}
			if e := escapedMeta(lit.Value, int(lit.Pos().Offset())-n); e != nil {
				return e
			}
		}
		return nil
	}
	return at(off)
}

func argvSyntax(cmd string, off int) *shellProblem {
	c := byte(' ')
	if off < len(cmd) {
		c = cmd[off]
	}
	return &shellProblem{Offset: off, Msg: fmt.Sprintf("%q is shell syntax, which would run on the instance, not in the container: the command is split into the container's arguments; quote it, or, in an image that has a shell, run sh -c 'train --lr \"$1\"' _ ${{ matrix.lr }} (values as positional parameters)", c)}
}

// unescaped returns the index of the first c in lit not after a backslash,
// or -1.
func unescaped(lit string, c byte) int {
	for i := 0; i < len(lit); i++ {
		switch lit[i] {
		case '\\':
			i++
		case c:
			return i
		}
	}
	return -1
}

// escapedMeta refuses a backslash before a shell metacharacter in a literal.
func escapedMeta(lit string, off int) *shellProblem {
	for i := 0; i+1 < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		c := lit[i+1]
		if strings.IndexByte(";&|<>()$`\n", c) >= 0 {
			return &shellProblem{Offset: off + i, Msg: fmt.Sprintf("an escaped %q in a container's command is shell syntax dressed as text: an entrypoint that runs its arguments through a shell would run it; write text in single quotes", c)}
		}
		i++
	}
	return nil
}
