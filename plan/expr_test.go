package plan_test

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
)

func TestParseTemplate(t *testing.T) {
	tests := map[string]struct {
		in      string
		refs    []plan.Ref
		errText string
		errAt   int
	}{
		"plain":        {in: "no expressions"},
		"one":          {in: "img:${{ vars.tag }}", refs: []plan.Ref{{NS: "vars", Name: "tag", Offset: 4}}},
		"tight":        {in: "${{matrix.lr}}", refs: []plan.Ref{{NS: "matrix", Name: "lr", Offset: 0}}},
		"two":          {in: "${{ cell.id }}/${{ run.id }}", refs: []plan.Ref{{NS: "cell", Name: "id"}, {NS: "run", Name: "id", Offset: 15}}},
		"unterminated": {in: "a ${{ vars.x", errText: "unterminated expression: ${{ without a closing }}", errAt: 2},
		"operator":     {in: "${{ vars.a + 1 }}", errText: `unsupported expression "vars.a + 1": expected ${{ namespace.name }} such as ${{ vars.image }} or ${{ matrix.lr }}`},
		"empty":        {in: "x${{ }}", errText: "empty expression: expected ${{ namespace.name }}, e.g. ${{ vars.image }}", errAt: 1},
		"no dot":       {in: "${{ vars }}", errText: `unsupported expression "vars": expected ${{ namespace.name }} such as ${{ vars.image }} or ${{ matrix.lr }}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, err := plan.ParseTemplate(tc.in)
			if tc.errText != "" {
				var ee *plan.ExprError
				if !errors.As(err, &ee) {
					t.Fatalf("err = %v, want an ExprError", err)
				}
				if ee.Msg != tc.errText || ee.Offset != tc.errAt {
					t.Fatalf("err = %q at %d, want %q at %d", ee.Msg, ee.Offset, tc.errText, tc.errAt)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.refs, tmpl.Refs()); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderQuotesShellWords(t *testing.T) {
	tmpl, err := plan.ParseTemplate("train --lr ${{ matrix.lr }} --name ${{ matrix.name }}")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"lr": "0.1", "name": "x; rm -rf / #'"}
	got := tmpl.Render(func(r plan.Ref) (string, bool) { v, ok := values[r.Name]; return v, ok }, shellquote.Quote)
	want := `train --lr 0.1 --name 'x; rm -rf / #'\'''`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	// The shell sees exactly the two values, as single words.
	out, err := exec.Command("sh", "-c", "set -- "+got+`; printf '%s|' "$@"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "train|--lr|0.1|--name|x; rm -rf / #'|" {
		t.Fatalf("the shell split it as %q", out)
	}
}

// FuzzTemplate: parsing never panics, and rendering with an identity
// lookup and no quoting reproduces every literal part.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"", "${{ vars.a }}", "x${{", "${{ a.b }}${{ c.d }}", "}}${{ matrix.lr}}", "${{ secrets.X }}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := plan.ParseTemplate(s)
		if err != nil {
			var ee *plan.ExprError
			if !errors.As(err, &ee) || ee.Offset < 0 || ee.Offset > len(s) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		got := tmpl.Render(func(plan.Ref) (string, bool) { return "", false }, nil)
		if len(tmpl.Refs()) == 0 && got != s {
			t.Fatalf("render of a literal changed it: %q → %q", s, got)
		}
	})
}
