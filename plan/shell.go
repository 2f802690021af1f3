package plan

import (
	"errors"
	"path"
	"slices"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A ${{ }} value in a run step's command is substituted as one single-quoted
// shell word (shellquote.Quote). That keeps it one word only where the shell
// reads a bare word: inside quotes, a heredoc, a comment, an arithmetic or
// ${…} expansion, after a backslash, or in the script string of sh -c or
// eval, the value's own quotes end the string it sits in and the rest runs
// as code. So validate parses each command with a real shell parser
// (mvdan.cc/sh) and refuses an expression in any of those places, with the
// safe form. The expressions are masked with letters of the same length
// before parsing, so the parser's offsets are the template's offsets.

// shellProblem is one finding in a shell command, at a byte offset of the
// command's text.
type shellProblem struct {
	Offset  int
	Msg     string
	Warning bool
}

// span is where an expression stands in a command's text.
type span struct {
	lo, hi int
	ns     string
}

// maskExprs returns text with every expression (at the offsets of refs)
// replaced by as many X as it has bytes, and each expression's span.
func maskExprs(text string, refs []Ref) (string, []span) {
	b := []byte(text)
	spans := make([]span, 0, len(refs))
	for _, r := range refs {
		end := strings.Index(text[r.Offset:], "}}")
		if end < 0 {
			continue
		}
		end += r.Offset + 2
		for i := r.Offset; i < end; i++ {
			b[i] = 'X'
		}
		spans = append(spans, span{r.Offset, end, r.NS})
	}
	return string(b), spans
}

func parseShell(text string, lang syntax.LangVariant) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(lang), syntax.KeepComments(true)).Parse(strings.NewReader(text), "")
}

// shellErrorOffset returns the byte offset and message of a parser error.
func shellErrorOffset(err error) (int, string) {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		return int(pe.Pos.Offset()), pe.Text
	}
	var le syntax.LangError
	if errors.As(err, &le) {
		return int(le.Pos.Offset()), le.Error()
	}
	return 0, err.Error()
}

// checkShellPlacement finds expressions of a shell command that would not
// arrive as one word.
func checkShellPlacement(text string, refs []Ref) []shellProblem {
	masked, spans := maskExprs(text, refs)
	f, err := parseShell(masked, syntax.LangBash)
	if err != nil {
		off, msg := shellErrorOffset(err)
		if off > len(text) {
			off = 0
		}
		if len(spans) == 0 {
			return []shellProblem{{Offset: off, Warning: true,
				Msg: "the command is not valid shell (" + msg + "): the instance's sh will refuse it"}}
		}
		return []shellProblem{{Offset: off,
			Msg: "the command is not valid shell (" + msg + "), so taoflow cannot tell where its ${{ }} values stand; fix the shell syntax"}}
	}
	if p, ok := misreadComment(masked, f); ok && slices.ContainsFunc(spans, func(sp span) bool { return !safeWordNS(sp.ns) }) {
		return []shellProblem{p}
	}
	chains := make([][]syntax.Node, len(spans))
	var stack []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		switch n.(type) {
		case *syntax.Lit, *syntax.SglQuoted, *syntax.Comment:
			lo, hi := int(n.Pos().Offset()), int(n.End().Offset())
			for i := sort.Search(len(spans), func(i int) bool { return spans[i].lo >= lo }); i < len(spans) && spans[i].lo < hi; i++ {
				if chains[i] == nil {
					chains[i] = append([]syntax.Node(nil), stack...)
				}
			}
		}
		return true
	})
	var out []shellProblem
	sc := &shellCmd{text: text, spans: spans, code: map[*syntax.CallExpr][]codeArg{}}
	for i, sp := range spans {
		if safeWordNS(sp.ns) {
			continue
		}
		expr := text[sp.lo:sp.hi]
		if msg := sc.placement(masked, sp.lo, chains[i], expr); msg != "" {
			out = append(out, shellProblem{Offset: sp.lo, Msg: msg})
		}
	}
	return out
}

// misreadComment finds a comment of f (the parse of masked) whose # does
// not start a word, and says so. The shell starts a comment only at a
// word's start (after a blank, a newline or an operator), but inside ( ),
// $( ), <( ), an array or a case, mvdan.cc/sh reads a # right after a
// quote or an expansion ((echo 'a'#), $(echo "$x"#)) as one, to the end of
// the line: what follows on that line is code to sh and a comment to the
// check, so an expression there would be judged as standing in a comment,
// or a line continued into the next would hide what the next line's
// expression is an argument of (eval, sh -c).
func misreadComment(masked string, f *syntax.File) (shellProblem, bool) {
	off := -1
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, is := n.(*syntax.Comment); is && off < 0 {
			if o := int(c.Hash.Offset()); o > 0 && o <= len(masked) && !strings.ContainsRune(" \t\n;&|()<>", rune(masked[o-1])) {
				off = o
			}
		}
		return off < 0
	})
	if off < 0 {
		return shellProblem{}, false
	}
	return shellProblem{Offset: off,
		Msg: "this # follows a word with no space before it: sh reads it as part of the word, but taoflow's shell parser reads a comment from it to the end of the line, so it cannot tell where the ${{ }} values of the command stand; put the # in quotes ('#') or a space before it"}, true
}

// shellCmd is a command being checked: its text as written and where its
// expressions stand.
type shellCmd struct {
	text  string
	spans []span // in order, apart
	code  map[*syntax.CallExpr][]codeArg
}

// codeArg is a word of a simple command that runs as code (word) and the
// word of the command that runs it (cmd), as indexes of its words.
type codeArg struct{ word, cmd int }

// hasExpr reports whether an expression stands inside node n.
func (sc *shellCmd) hasExpr(n syntax.Node) bool {
	lo, hi := int(n.Pos().Offset()), int(n.End().Offset())
	i := sort.Search(len(sc.spans), func(i int) bool { return sc.spans[i].hi > lo })
	return i < len(sc.spans) && sc.spans[i].lo < hi
}

// source is the text of n as written.
func (sc *shellCmd) source(n syntax.Node) string {
	lo, hi := int(n.Pos().Offset()), int(n.End().Offset())
	if lo < 0 || hi > len(sc.text) || lo > hi {
		return ""
	}
	return sc.text[lo:hi]
}

// safeWordNS reports whether every value of a namespace is made only of
// characters that no shell treats specially, and so reads the same in any
// shell context: cell.id and cell.index (sanitised), slot.index and
// slot.gpus (digits and commas), run.id (the plan name,
// a time and hex digits) and instance.name (lower-case letters, digits, -).
func safeWordNS(ns string) bool {
	return ns == NSCell || ns == NSSlot || ns == NSRun || ns == NSInstance
}

// placement says why the expression at off, whose enclosing nodes are
// chain (outermost first, a leaf last), would not arrive as one word; ""
// when it does. Past a $( ) the value is no longer read by the shell as
// text, but it may be what the command inside prints: the walk goes on
// out of every $( ) to the places that run or evaluate such output (the
// script of sh -c or eval, arithmetic, enclosing backquotes).
func (sc *shellCmd) placement(masked string, off int, chain []syntax.Node, expr string) string {
	if len(chain) == 0 {
		return expr + " stands where taoflow cannot tell how the shell reads it; put it outside quotes as a word of its own"
	}
	leaf := chain[len(chain)-1]
	if hi := off + len(expr); hi < len(masked) && masked[hi] == '#' && slices.ContainsFunc(chain, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.Subshell, *syntax.ProcSubst, *syntax.ArrayExpr, *syntax.CaseClause:
			return true
		}
		return false
	}) {
		// The value ends in a quote: some parsers of what ( opens
		// (mvdan.cc/sh among them) read a # after a quote as a comment,
		// which would leave the ( unclosed (misreadComment).
		return "a # right after " + expr + " inside ( ), $( ), <( ), an array or a case may start a comment once the value (a quoted word) is pasted in; put the # in quotes ('#') or a space before it"
	}
	switch leaf.(type) {
	case *syntax.Comment:
		return expr + " is inside a shell comment: a value holding a newline would end the comment and run the rest; remove it from the comment"
	case *syntax.SglQuoted:
		return expr + " is inside single quotes: its value is pasted in as a quoted word, so a value holding ' ends the quotes and the rest runs as shell code; end the quotes before it and reopen them after, e.g. 'name='" + expr + "' …' (still one word; for sh -c scripts pass it as a positional parameter: sh -c 'train --lr \"$1\"' _ " + expr + ")"
	}
	// Walk outwards from the leaf. end is where the part of chain inside
	// the innermost $( ) passed so far ends; out is set once one was.
	end, out := len(chain), false
	const subst = ", here through the output of a $( ) around it"
	via := func() string {
		if out {
			return subst
		}
		return ""
	}
	for i := len(chain) - 2; i >= 0; i-- {
		switch n := chain[i].(type) {
		case *syntax.DblQuoted:
			if out {
				continue // a $( )'s output is not read again inside "…"
			}
			return expr + " is inside double quotes: its value is pasted in as a single-quoted word, so a value holding \" ends the quotes and the rest runs as shell code; end the quotes before it and reopen them after, e.g. \"lr=\"" + expr + "\" …\" (still one word)"
		case *syntax.Redirect:
			if out {
				continue // a $( ) in a heredoc is parsed as one
			}
			if n.Hdoc != nil && i+1 < len(chain) && chain[i+1] == syntax.Node(n.Hdoc) {
				return expr + " is inside a heredoc, where quotes are not read: a value holding $(…) or ` would run; set a variable before it (v=" + expr + ") and write $v in the heredoc"
			}
			if n.Op == syntax.Hdoc || n.Op == syntax.DashHdoc {
				return expr + " is a heredoc's delimiter; write the delimiter literally"
			}
			if n.N != nil && i+1 < len(chain) && chain[i+1] == syntax.Node(n.N) {
				return expr + " stands before a redirection, where bash reads {name} as a variable for the file descriptor; write it literally"
			}
		case *syntax.Assign:
			if n.Name != nil && chain[i+1] == syntax.Node(n.Name) {
				return expr + " names a variable: the shell reads a name there, not a word; write the name literally"
			}
		case *syntax.FuncDecl:
			if chain[i+1] == syntax.Node(n.Name) {
				return expr + " names a function; write the name literally"
			}
		case *syntax.WordIter:
			if chain[i+1] == syntax.Node(n.Name) {
				return expr + " names the loop variable; write the name literally"
			}
		case *syntax.ParamExp:
			return expr + " is part of a $ expansion (${…} or right after $)" + via() + ": the shell would not read it as one word; set a variable first (v=" + expr + ") and expand $v"
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop,
			*syntax.BinaryArithm, *syntax.UnaryArithm, *syntax.ParenArithm:
			return expr + " is inside arithmetic" + via() + ", which evaluates its text as an expression (bash runs $(…) found in an array subscript, even through a variable); check the value is a number first: n=" + expr + "; case $n in ''|*[!0-9]*) exit 2;; esac; then use $((n))"
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				return expr + " is an operand of " + n.Op.String() + " in [[ ]]" + via() + ", which bash evaluates as arithmetic (running $(…) found in an array subscript); check the value is a number first: n=" + expr + "; case $n in ''|*[!0-9]*) exit 2;; esac; then use [ \"$n\" " + n.Op.String() + " … ]"
			default: // string, file and pattern tests read a word
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				return expr + " is a variable name for " + n.Op.String() + " in [[ ]]" + via() + ", where bash runs $(…) found in an array subscript; write the name literally"
			}
		case *syntax.ExtGlob:
			return expr + " is inside an extended glob pattern" + via() + ", where quotes are not read; set a variable first (v=" + expr + ")"
		case *syntax.CmdSubst:
			if n.Backquotes {
				return expr + " is inside backquotes `…`, which remove backslashes before the inner shell reads the text (and a ` in the value ends them); use $( … ) instead"
			}
			if msg := sc.scriptArg(chain[i+1:end], expr, out); msg != "" {
				return msg
			}
			end, out = i+1, true
		case *syntax.ProcSubst:
			if msg := sc.scriptArg(chain[i+1:end], expr, out); msg != "" {
				return msg
			}
			end, out = i+1, true
		}
	}
	if msg := sc.scriptArg(chain[:end], expr, out); msg != "" {
		return msg
	}
	// A backslash right before it escapes the quote that starts the value.
	if lit, ok := leaf.(*syntax.Lit); ok {
		n := 0
		for j := off - 1; j >= int(lit.Pos().Offset()) && masked[j] == '\\'; j-- {
			n++
		}
		if n%2 == 1 {
			return "a backslash right before " + expr + " escapes the quote that starts its value, so the rest of the value runs as shell code; remove the backslash"
		}
	}
	return ""
}

// scriptArg reports an expression that is (part of) the shell code handed
// to sh -c, bash -c, su -c or eval: the nearest command word around it in
// chain. out says the expression reaches that word as the output of a
// $( ) inside it.
func (sc *shellCmd) scriptArg(chain []syntax.Node, expr string, out bool) string {
	for i := len(chain) - 2; i >= 0; i-- {
		call, ok := chain[i].(*syntax.CallExpr)
		if !ok {
			continue
		}
		w, ok := chain[i+1].(*syntax.Word)
		if !ok {
			return ""
		}
		code, ok := sc.code[call]
		if !ok {
			code = sc.codeArgs(call.Args)
			sc.code[call] = code
		}
		for _, ca := range code {
			if k := ca.word; call.Args[k] == w {
				name := sc.commandName(call.Args[ca.cmd])
				if name == "[" || name == "test" {
					return expr + " is the variable name that " + name + " " + sc.source(call.Args[k-1]) + " reads, where bash runs a $(…) found in an array subscript; write the name literally"
				}
				how := ""
				if out {
					how = " (as the output of the $( ) around it)"
				}
				return expr + " is part of the script that " + name + " runs as shell code" + how + ", where a value is code, not a word; pass it as a positional parameter instead: sh -c 'train --lr \"$1\"' _ " + expr
			}
		}
		return ""
	}
	return ""
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true, "ksh": true, "mksh": true}

// codeArgs returns the indexes of the words of a simple command that a
// shell runs as code: the script after -c of sh/bash/… (wherever the shell
// appears among the words: env sh -c, docker run image sh -c, xargs sh -c),
// the command after su -c, every word after eval, trap's action, the name
// after -v or -R of test and [ (bash runs a $( ) in its subscript). A word
// that is not a plain literal ("sh", s\h, /bin/s?, $SHELL, $(command -v
// sh), ${{ vars.x }}) may be a shell: followed by -c it is taken as one.
// (Other programs that run a word as code — ssh HOST CMD, a word piped
// into sh, python -c — are not recognised.)
func (sc *shellCmd) codeArgs(args []*syntax.Word) []codeArg {
	var out []codeArg
	for i := 0; i < len(args); i++ {
		name := ""
		if t, ok := sc.staticText(args[i]); ok {
			name = path.Base(t)
		}
		switch {
		case name == "trap":
			// trap CODE SIGNAL…: the first word that is not an option.
			for j := i + 1; j < len(args); j++ {
				if a := args[j].Lit(); a == "--" || strings.HasPrefix(a, "-") && a != "-" {
					continue
				}
				out = append(out, codeArg{j, i})
				break
			}
			return out
		case name == "eval":
			for j := i + 1; j < len(args); j++ {
				out = append(out, codeArg{j, i})
			}
			return out
		case name == "su":
			for j := i + 1; j+1 < len(args); j++ {
				if a, _ := sc.staticText(args[j]); a == "-c" || a == "--command" {
					out = append(out, codeArg{j + 1, i})
				}
			}
			return out // the rest are su's arguments
		case (name == "test" || args[i].Lit() == "[") && i == 0:
			for j := i + 1; j+1 < len(args); j++ {
				if a, _ := sc.staticText(args[j]); a == "-v" || a == "-R" {
					out = append(out, codeArg{j + 1, i})
				}
			}
		case shells[name] || !sc.plainLiteral(args[i]):
			scripts, end := sc.shellScript(args, i, shells[name])
			for _, j := range scripts {
				out = append(out, codeArg{j, i})
			}
			// The words it took as options and their arguments run no
			// command (sh -o sh -o sh … is read once, not once a word).
			i = max(i, end-1)
		}
	}
	return out
}

// shellScript returns the indexes of the words that may be the script
// the shell at args[i] runs when it is given -c, and the index where its
// options end: the first word that is
// not an option, after the arguments of the options that take one (-o and
// -O, +o and +O, also in clusters such as -eo pipefail; --rcfile,
// --init-file). After a shell named literally, or after -c, a word that
// is not a plain literal may be -c, another option, or the script; after
// a word that only may be a shell it ends the options.
func (sc *shellCmd) shellScript(args []*syntax.Word, i int, literal bool) ([]int, int) {
	var out []int
	hasC, maybe := false, false
	j := i + 1
	for ; j < len(args); j++ {
		a, static := sc.staticText(args[j])
		if !static {
			if hasC || maybe {
				out = append(out, j)
			}
			if !literal && !hasC {
				break // an argument of a program that may not be a shell
			}
			maybe = true
			continue
		}
		if a == "--" || a == "-" {
			if (hasC || maybe) && j+1 < len(args) {
				out = append(out, j+1)
			}
			break
		}
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') {
			if hasC || maybe {
				out = append(out, j)
			}
			break
		}
		if strings.HasPrefix(a, "--") {
			if a == "--rcfile" || a == "--init-file" {
				j++
			}
			continue
		}
		if a[0] == '-' && strings.ContainsRune(a[1:], 'c') {
			hasC = true
		}
		j += strings.Count(a[1:], "o") + strings.Count(a[1:], "O")
	}
	return out, j
}

// plainLiteral reports whether w is text that the shell reads as itself:
// one literal without quotes, backslashes, glob or brace characters or
// expressions.
func (sc *shellCmd) plainLiteral(w *syntax.Word) bool {
	if len(w.Parts) != 1 || sc.hasExpr(w) {
		return false
	}
	lit, ok := w.Parts[0].(*syntax.Lit)
	return ok && !strings.ContainsAny(lit.Value, "\\*?[]{}")
}

// staticText is the text w stands for when it has no expansion and no
// expression: literals with their backslashes removed, quotes removed.
// Glob and brace characters count as expansions.
func (sc *shellCmd) staticText(w *syntax.Word) (string, bool) {
	if sc.hasExpr(w) {
		return "", false
	}
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[]{}") {
				return "", false
			}
			b.WriteString(unbackslash(p.Value, ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unbackslash(lit.Value, "$`\"\\\n"))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unbackslash removes the backslashes before the characters of only (any
// character when only is empty), and backslash-newlines.
func unbackslash(s, only string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// commandName is how a message names the command word w: the base name
// of a literal path, or the word as written.
func (sc *shellCmd) commandName(w *syntax.Word) string {
	if t, ok := sc.staticText(w); ok && t != "" {
		return path.Base(t)
	}
	return sc.source(w)
}
