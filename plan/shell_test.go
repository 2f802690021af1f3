package plan_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
)

// payloads are values of ${{ vars.x }} that try to run `touch pwned`.
var payloads = []string{
	`$(touch pwned)`,
	"x\"; touch pwned; \"",
	"x'; touch pwned; '",
	"a;touch pwned;#",
	";touch pwned",
	"a\ntouch pwned\n#",
	"`touch pwned`",
	"a[$(touch pwned)]",
	"a`;touch pwned;echo `",
}

// commandPlan is a plan whose one run step has the given command (a
// container command when image is set).
func commandPlan(command, image string) []byte {
	var b strings.Builder
	b.WriteString("taoflow: 1\nname: shell\nvars: {x: a}\ninstances: {box: {}}\nsteps:\n  - id: r\n    uses: run\n    matrix: {m: [a]}\n    with:\n")
	if image != "" {
		b.WriteString("      image: " + image + "\n")
	}
	b.WriteString("      command: |\n")
	for _, l := range strings.Split(command, "\n") {
		b.WriteString("        " + l + "\n")
	}
	b.WriteString("  - {id: w, uses: wait, needs: [r], matrix: inherit}\n")
	return []byte(b.String())
}

// injects reports whether the command, with ${{ vars.x }} substituted as
// taoflow does (one quoted word), runs code from some payload under shell.
func injects(t *testing.T, shell, command string) (bool, string) {
	t.Helper()
	tmpl, err := plan.ParseTemplate(command)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		dir := t.TempDir()
		script := tmpl.Render(func(plan.Ref) (string, bool) { return p, true }, shellquote.Quote)
		cmd := exec.Command(shell, "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		_ = cmd.Run()
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			return true, p
		}
	}
	return false, ""
}

// TestExpressionPlacement: each unsafe place of an expression in a command
// is an injection when run (the attack), and validate refuses it with its
// position; each safe form runs no payload and validates.
func TestExpressionPlacement(t *testing.T) {
	unsafe := map[string]struct {
		command, shell, want string
	}{
		"double quotes":     {command: `echo "lr=${{ vars.x }}"`, want: "plan.yaml:11:18: error: ${{ vars.x }} is inside double quotes"},
		"single quotes":     {command: `echo 'lr=${{ vars.x }}'`, want: "plan.yaml:11:18: error: ${{ vars.x }} is inside single quotes"},
		"sh -c script":      {command: `sh -c 'train ${{ vars.x }}'`, want: "is inside single quotes"},
		"sh -c escaped":     {command: `sh -c train\ ${{ vars.x }}`, want: "plan.yaml:11:22: error: ${{ vars.x }} is part of the script that sh runs as shell code"},
		"bash -ec":          {command: `bash -ec echo\ ${{ vars.x }}`, want: "the script that bash runs"},
		"env sh -c":         {command: `env A=1 /bin/sh -c ${{ vars.x }}`, want: "the script that sh runs"},
		"eval":              {command: `eval echo ${{ vars.x }}`, want: "the script that eval runs"},
		"heredoc":           {command: "cat <<EOF\nlr=${{ vars.x }}\nEOF", want: "plan.yaml:12:12: error: ${{ vars.x }} is inside a heredoc"},
		"comment":           {command: "echo hi # ${{ vars.x }}", want: "is inside a shell comment"},
		"backslash":         {command: `echo \${{ vars.x }}`, want: "plan.yaml:11:15: error: a backslash right before ${{ vars.x }}"},
		"in $( ) in quotes": {command: `echo "$(echo "${{ vars.x }}")"`, want: "is inside double quotes"},
		// Issue 22.6: the bypasses of the last round's check.
		`"sh" -c`:                {command: `"sh" -c echo\ ${{ vars.x }}`, want: "plan.yaml:11:23: error: ${{ vars.x }} is part of the script that sh runs"},
		`sh "-c"`:                {command: `sh "-c" echo\ ${{ vars.x }}`, want: "the script that sh runs"},
		`s\h -c`:                 {command: `s\h -c echo\ ${{ vars.x }}`, want: "the script that sh runs"},
		"bash -O extglob -c":     {command: `bash -O extglob -c echo\ ${{ vars.x }}`, want: "the script that bash runs"},
		"bash -eo pipefail -c":   {command: `bash -eo pipefail -c echo\ ${{ vars.x }}`, want: "the script that bash runs"},
		"$(command -v sh) -c":    {command: `$(command -v sh) -c echo\ ${{ vars.x }}`, want: "the script that $(command -v sh) runs"},
		"backquotes around $( )": {command: "echo `echo $(echo ${{ vars.x }})`", shell: "bash", want: "is inside backquotes"},
		"eval of a $( )":         {command: `eval "$(echo ${{ vars.x }})"`, want: "the script that eval runs as shell code (as the output of the $( ) around it)"},
		"sh -c of a $( )":        {command: `sh -c "$(echo ${{ vars.x }})"`, want: "the script that sh runs"},
		"arithmetic of a $( )":   {command: `echo $(( $(echo ${{ vars.x }}) ))`, shell: "bash", want: "is inside arithmetic, here through the output of a $( )"},
		"[[ -eq ]]":              {command: `[[ ${{ vars.x }} -eq 1 ]]`, shell: "bash", want: "is an operand of -eq in [[ ]]"},
		"[[ -v ]]":               {command: `[[ -v ${{ vars.x }} ]]`, shell: "bash", want: "is a variable name for -v"},
		"[ -v ]":                 {command: `[ -v ${{ vars.x }} ]`, shell: "bash", want: "is the variable name that [ -v reads"},
		// mvdan.cc/sh reads this # as a comment to the end of the line
		// (inside ( ), after a quote); sh reads a word a# and continues
		// eval's line into the next, so the value ran as code.
		"# after a quote in ( )": {command: "(echo 'a'# ; eval \\\n${{ vars.x }})", want: "plan.yaml:11:18: error: this # follows a word with no space before it"},
	}
	for name, tc := range unsafe {
		t.Run("unsafe/"+name, func(t *testing.T) {
			shell := "sh"
			if strings.HasPrefix(tc.command, "bash") {
				shell = "bash"
			}
			if tc.shell != "" {
				shell = tc.shell
			}
			if ok, _ := injects(t, shell, tc.command); !ok {
				t.Fatalf("no payload injected through %q: the case does not show an attack", tc.command)
			}
			_, diags := plan.Parse("plan.yaml", commandPlan(tc.command, ""), plan.Options{})
			got := render(diags)
			if !diags.HasErrors() || !strings.Contains(got, tc.want) {
				t.Fatalf("validate said:\n%s\nwant an error containing %q", got, tc.want)
			}
		})
	}
	refused := map[string]string{
		"after $":         `echo $${{ vars.x }}`,
		"in ${}":          `echo ${A:-${{ vars.x }}}`,
		"arithmetic":      `echo $(( ${{ vars.x }} + 1 ))`,
		"backquotes":      "echo `echo ${{ vars.x }}`",
		"heredoc word":    "cat <<${{ vars.x }}\nx\n",
		"su -c":           `su -c ${{ vars.x }} nobody`,
		"trap":            `trap echo\ ${{ vars.x }} EXIT`,
		"$SHELL -c":       `"$SHELL" -c ${{ vars.x }}`,
		"not valid shell": `echo ${{ vars.x }} "`,
		"expression -c":   `${{ vars.x }} -c echo\ ${{ vars.x }}`,
		"$SHELL -O -c":    `"$SHELL" -O extglob -c ${{ vars.x }}`,
		"computed option": `sh "$FLAGS" ${{ vars.x }}`,
		"--rcfile":        `bash --rcfile f -c ${{ vars.x }}`,
		"glob sh":         `/bin/s? -c ${{ vars.x }}`,
		"quoted eval":     `"eval" ${{ vars.x }}`,
		"{var} redirect":  `{${{ vars.x }}}<0 true`,
		"# after in ( )":  `(echo ${{ vars.x }}#)`,
		"# after in case": "case a in a) echo ${{ vars.x }}#;; esac",
	}
	for name, command := range refused {
		t.Run("refused/"+name, func(t *testing.T) {
			_, diags := plan.Parse("plan.yaml", commandPlan(command, ""), plan.Options{})
			if !diags.HasErrors() {
				t.Fatalf("validate accepted %q", command)
			}
		})
	}
	safe := []string{
		`echo lr=${{ vars.x }}`,
		`echo "lr="${{ vars.x }}" and more"`,
		`echo 'lr='${{ vars.x }}`,
		`sh -c 'train --lr "$1"' _ ${{ vars.x }}`,
		`bash -c 'echo "$@"' _ --lr ${{ vars.x }}`,
		"v=${{ vars.x }}\ncat <<EOF\nlr=$v\nEOF",
		`echo $(echo ${{ vars.x }})`,
		`echo "$(echo ${{ vars.x }})"`,
		`X=${{ vars.x }} env`,
		`echo \\${{ vars.x }}`,
		`for v in ${{ vars.x }} b; do echo "$v"; done`,
		`case ${{ vars.x }} in a) echo a;; esac`,
		"echo \"cell ${{ cell.id }} of ${{ run.id }} on ${{ instance.name }}\" # ${{ cell.index }}",
		`sh -c 'echo ${{ cell.id }}'`,
		`"$PY" train.py ${{ vars.x }}`,
		`$(command -v python3) -m json.tool ${{ vars.x }} || true`,
		`bash -O extglob -c 'echo "$1"' _ ${{ vars.x }}`,
		"cat <<EOF\n$(echo ${{ vars.x }})\nEOF",
		`[ ${{ vars.x }} = a ]`,
		`[[ ${{ vars.x }} == a ]]`,
		`sh -c 'echo "$1"' _ "$(echo ${{ vars.x }})"`,
		`echo 'a'#b ${{ vars.x }}`,
		`(echo 'a' #c` + "\n" + `echo ${{ vars.x }})`,
		"(echo 'a'#\n)", // misread by the parser, but no value to misplace
	}
	for _, command := range safe {
		t.Run("safe/"+command, func(t *testing.T) {
			if !strings.Contains(command, "cell.") {
				if ok, p := injects(t, "sh", command); ok {
					t.Fatalf("payload %q injected through %q", p, command)
				}
			}
			_, diags := plan.Parse("plan.yaml", commandPlan(command, ""), plan.Options{})
			if len(diags) > 0 {
				t.Fatalf("diagnostics for a safe form:\n%s", render(diags))
			}
		})
	}
}

// TestContainerArgv: a container's command is words for docker run and
// nothing else; the escaped metacharacters that passed the old check
// (`\;touch\ x\;`) are refused too, by validate with a position.
func TestContainerArgv(t *testing.T) {
	for cmd, want := range map[string]string{
		`train \;touch\ x\;`:        `an escaped ';'`,
		`train a\|b`:                `an escaped '|'`,
		`print "\$HOME"`:            `an escaped '$'`,
		`train && rm -rf ~`:         `'&' is shell syntax`,
		`train; reboot`:             `';' is shell syntax`,
		`train | tee log`:           `'|' is shell syntax`,
		`train > log`:               `'>' is shell syntax`,
		`(train)`:                   `'(' is shell syntax`,
		"train\nreboot":             `'\n' is shell syntax`,
		`train --key $NGC_KEY`:      `'$' is shell syntax`,
		`train --key "$NGC_KEY"`:    `'$' inside double quotes`,
		"train `id`":                "'`' is shell syntax",
		"train \"`id`\"":            "'`' inside double quotes",
		`train ~/spec.yaml`:         `a word starting with '~'`,
		`train #rest`:               `a word starting with '#'`,
		`train 'a`:                  "a quote is not closed",
		`train "a`:                  "a quote is not closed",
		`train \`:                   "a trailing backslash",
		`X=1 train`:                 "",
		`train $'a'`:                `'$' is shell syntax`,
		`train $((1+1))`:            `'$' is shell syntax`,
		`train lr='1; reboot'`:      "",
		`echo 'a && b' "c;d" e\ f`:  "",
		`rm *.pth model_?.pth [ab]`: "",
		`x=~/a b~c a#b`:             "",
		"a 'b\nc'":                  "",
		``:                          "",
	} {
		err := plan.CheckContainerArgv(cmd)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckContainerArgv(%q) = %v", cmd, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckContainerArgv(%q) = %v, want %q", cmd, err, want)
		}
	}
	_, diags := plan.Parse("plan.yaml", commandPlan(`train \;touch\ x\; --lr ${{ vars.x }}`, "busybox"), plan.Options{})
	want := "plan.yaml:12:15: error: an escaped ';' in a container's command"
	if got := render(diags); !strings.Contains(got, want) {
		t.Errorf("validate said:\n%s\nwant %q", got, want)
	}
}

// TestManyRefusedExpressions: a command of thousands of refused
// expressions is reported in part (each position costs a look at the
// text: 20,000 took validate 106 s), and checked in time linear in its
// words (a cache per simple command: the word scan was cubic).
func TestManyRefusedExpressions(t *testing.T) {
	cmd := "eval" + strings.Repeat(" ${{ vars.x }}", 100)
	_, diags := plan.Parse("plan.yaml", commandPlan(cmd, ""), plan.Options{})
	got := render(diags)
	if n := strings.Count(got, ": error: "); n != 21 || !strings.Contains(got, "plan.yaml:10:16: error: and 80 more expressions of this command are refused") {
		t.Fatalf("%d errors:\n%s", n, got)
	}
}
