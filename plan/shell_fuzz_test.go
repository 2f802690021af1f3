package plan

import (
	"fmt"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/taoflow/taoflow/internal/shellquote"
)

// hostile is a value holding every character a shell treats specially.
const hostile = "a'b\"c$(touch p)`id`;d&e|f>g<h(i)j\nk#l\\m ${n} $((1)) *? ~ =o"

// shape is the syntax tree of a script with the contents of literals and
// single-quoted strings left out: what the shell will do, not with which
// text. One word more or less, a new command, a new expansion or a comment
// all change it.
func shape(f *syntax.File) string {
	var b strings.Builder
	depth := 0
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			depth--
			return true
		}
		depth++
		switch n.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
			return true
		}
		fmt.Fprintf(&b, "%d%T ", depth, n)
		return true
	})
	return b.String()
}

// FuzzExpressionPlacement: a command that validate accepts keeps the shape
// it has with harmless values when every vars/matrix expression is given a
// hostile value, quoted as apply quotes it — an accepted placement is one
// where no value can add a command, an expansion or a word. It never runs
// the commands.
func FuzzExpressionPlacement(f *testing.F) {
	for _, s := range []string{
		`echo lr=${{ vars.x }}`,
		`echo "lr=${{ vars.x }}"`,
		`echo 'lr=${{ vars.x }}'`,
		`sh -c 'train --lr "$1"' _ ${{ vars.x }}`,
		`sh -c train\ ${{ vars.x }}`,
		"cat <<EOF\n${{ vars.x }}\nEOF",
		"v=${{ vars.x }}\ncat <<EOF\n$v\nEOF",
		"echo a # ${{ vars.x }}",
		`echo \${{ vars.x }}`,
		`echo \\${{ vars.x }}`,
		`${{ vars.x }}=1 env`,
		`${{ vars.x }} --flag`,
		`echo $(( ${{ vars.x }} ))`,
		"echo `echo ${{ vars.x }}`",
		`echo "$(echo ${{ vars.x }})"`,
		`for ${{ vars.x }} in a; do :; done`,
		`eval ${{ vars.x }}`,
		`trap ${{ vars.x }} EXIT`,
		`echo ${{ cell.id }} "${{ run.id }}"`,
		`"sh" -c echo\ ${{ vars.x }}`,
		`bash -O extglob -c echo\ ${{ vars.x }}`,
		`$(command -v sh) -c echo\ ${{ vars.x }}`,
		"echo `echo $(echo ${{ vars.x }})`",
		`eval "$(echo ${{ vars.x }})"`,
		`[[ ${{ vars.x }} -eq 1 ]]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		tmpl, err := ParseTemplate(command)
		if err != nil || len(command) > 2000 {
			return
		}
		refs := tmpl.Refs()
		if len(refs) == 0 {
			return
		}
		for _, p := range checkShellPlacement(command, refs) {
			if p.Offset < 0 || p.Offset > len(command) {
				t.Fatalf("problem at offset %d of a %d-byte command: %s", p.Offset, len(command), p.Msg)
			}
			if !p.Warning {
				return // refused
			}
		}
		masked, _ := maskExprs(command, refs)
		want, err := parseShell(masked, syntax.LangBash)
		if err != nil {
			t.Fatalf("accepted a command that does not parse: %v", err)
		}
		for _, value := range []string{hostile, "A=b", "", "-n"} {
			rendered := tmpl.Render(func(r Ref) (string, bool) {
				if safeWordNS(r.NS) {
					return "lr-0.1_b-2", true
				}
				return value, true
			}, shellquote.Quote)
			got, err := parseShell(rendered, syntax.LangBash)
			if err != nil {
				t.Fatalf("accepted %q, but with the value %q it does not parse: %v\n%s", command, value, err, rendered)
			}
			if shape(got) != shape(want) {
				t.Fatalf("accepted %q, but the value %q changes what the shell does:\n%s\nwant shape %s\ngot shape  %s", command, value, rendered, shape(want), shape(got))
			}
		}
	})
}
