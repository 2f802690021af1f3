package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestControlsInPlan: a control character that a double-quoted YAML
// escape puts in a string or a key (ESC of an OSC 52 clipboard write, a
// carriage return, NUL, a C1 control) is a validate error at its line and
// column; tab and newline are text.
func TestControlsInPlan(t *testing.T) {
	cases := map[string]struct{ value, want string }{
		"osc 52":    {`"a\e]52;c;dG91Y2ggcHduZWQ=\a"`, "plan.yaml:3:13: error: the string holds an escape character (ESC"},
		"csi erase": {`"xy\x1b[2K\x1b[1Ay"`, "plan.yaml:3:14: error: the string holds an escape character"},
		"cr":        {`"safe\rrm -rf"`, "plan.yaml:3:16: error: the string holds a carriage return"},
		"nul":       {`"a\0b"`, "the string holds a NUL byte"},
		"c1 csi":    {`"a\u009b2Jb"`, "the control character U+009B"},
		"next line": {`"a\Nb"`, "the control character U+0085"},
		"del":       {`"a\x7fb"`, "the control character U+007F"},
		"in a key":  {`{"a\eb": 1}`, "plan.yaml:3:12: error: the key holds an escape character"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := "taoflow: 1\nname: ctl\nvars: {x: " + tc.value + "}\ninstances: {box: {}}\nsteps:\n  - {id: r, uses: run, with: {command: echo hi}}\n  - {id: w, uses: wait, needs: [r]}\n"
			_, diags := plan.Parse("plan.yaml", []byte(src), plan.Options{})
			if got := render(diags); !strings.Contains(got, tc.want) {
				t.Fatalf("validate said:\n%s\nwant %q", got, tc.want)
			}
		})
	}
	ok := "taoflow: 1\nname: ctl\ninstances: {box: {}}\nsteps:\n  - id: r\n    uses: run\n    with:\n      command: \"printf '%s\\\\n' a\\tb\\nc\"\n  - {id: w, uses: wait, needs: [r]}\n"
	if _, diags := plan.Parse("plan.yaml", []byte(ok), plan.Options{}); len(diags) > 0 {
		t.Fatalf("tab and newline refused:\n%s", render(diags))
	}
}

// TestOverrideControlsAndSecrets: --var and --var-file values are checked
// as a plan's strings are: a control character, or a value that the secret
// linter refuses in a plan (an NGC key, an AWS key id), is an error that
// names the var and where it was set, never the value, and says the fix.
func TestOverrideControlsAndSecrets(t *testing.T) {
	src := []byte("taoflow: 1\nname: ov\nvars: {x: a, y: b}\ninstances: {box: {}}\nsteps:\n  - id: r\n    uses: run\n    with:\n      command: echo ${{ vars.x }} ${{ vars.y }}\n  - {id: w, uses: wait, needs: [r]}\n")
	const ngc = "nvapi-Zq3xR8kLm2Pv7TbW9cYd4HfJ6uNs1AeG"
	const aws = "AKIAQ3EGZ5ZKXN7PLW2M"
	cases := map[string]struct {
		opts    plan.Options
		want    []string
		secrets []string
	}{
		"ngc key by --var": {opts: plan.Options{Vars: map[string]string{"x": ngc}},
			want: []string{`--var x: error: --var x: the value of var "x" looks like an NGC API key`, "declare it in the plan under secrets:", "${{ secrets.NAME }}"}, secrets: []string{ngc, "Zq3xR8"}},
		"aws key by --var-file": {opts: plan.Options{Vars: map[string]string{"y": aws},
			Sources: map[string]plan.VarSource{"y": {Pos: plan.Pos{File: "vars.yaml", Line: 2, Col: 1}, From: "--var-file vars.yaml line 2"}}},
			want: []string{`vars.yaml:2:1: error: --var-file vars.yaml line 2: the value of var "y" looks like an AWS access key id`}, secrets: []string{aws, "Q3EGZ5"}},
		"osc 52 by --var": {opts: plan.Options{Vars: map[string]string{"x": "a\x1b]52;c;dG91Y2g=\x07"}},
			want: []string{`--var x: error: --var x: the value of var "x" holds, at byte 1, an escape character (ESC, \e)`}, secrets: []string{"\x1b"}},
		"nul by --var": {opts: plan.Options{Vars: map[string]string{"x": "a\x00b"}},
			want: []string{`the value of var "x" holds, at byte 1, a NUL byte`}, secrets: []string{"\x00"}},
		"not utf-8 by --var": {opts: plan.Options{Vars: map[string]string{"x": "a\xffb"}},
			want: []string{`the value of var "x" holds, at byte 1, a byte that is not UTF-8`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, diags := plan.Parse("plan.yaml", src, tc.opts)
			got := render(diags)
			if !diags.HasErrors() {
				t.Fatalf("accepted:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("validate said:\n%s\nwant %q", got, w)
				}
			}
			for _, s := range tc.secrets {
				if strings.Contains(got, s) {
					t.Errorf("the message shows the value (%q):\n%s", s, got)
				}
			}
		})
	}
	if _, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"x": "resnet18", "y": "s3://bucket/run-1"}}); len(diags) > 0 {
		t.Fatalf("plain overrides refused:\n%s", render(diags))
	}
}

// TestRenderedBound: a var of 100 KB named 20 times would render 2 MB in
// one command (10,000 times: 1 GB, which exhausted memory at validate); a
// value whose substitution passes plan.MaxRendered is refused at the value,
// naming the limit, and nothing that large is built.
func TestRenderedBound(t *testing.T) {
	big := strings.Repeat("a", 100<<10)
	cmd := strings.Repeat("${{ vars.x }} ", 20)
	src := []byte("taoflow: 1\nname: big\nvars: {x: a}\ninstances: {box: {}}\nsteps:\n  - id: r\n    uses: run\n    with:\n      command: echo " + cmd + "\n  - {id: w, uses: wait, needs: [r]}\n")
	_, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"x": big}})
	got := render(diags)
	if want := "plan.yaml:9:16: error: once its ${{ }} expressions are substituted, this value is more than 1 MiB, the limit of one rendered value (plan.MaxRendered)"; !strings.Contains(got, want) {
		t.Fatalf("validate said:\n%.2000s\nwant %q", got, want)
	}
	// Ten times under the bound passes.
	src = bytes.Replace(src, []byte(cmd), []byte(strings.Repeat("${{ vars.x }} ", 2)), 1)
	if _, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"x": big}}); diags.HasErrors() {
		t.Fatalf("a 200 KB command refused:\n%.2000s", render(diags))
	}
}

// TestFileLimits: plan and var files are read only from regular files of
// at most plan.MaxFileSize bytes: /dev/zero, a FIFO and a directory are
// refused (they exhausted memory or hung), and so is a file one byte over
// the limit.
func TestFileLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, append([]byte("x: "), bytes.Repeat([]byte("a"), plan.MaxFileSize)...), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/dev/zero": "not a regular file (a character device)",
		fifo:        "not a regular file (a named pipe)",
		dir:         "not a regular file (a directory)",
		huge:        "more than the limit of 4 MiB",
	}
	for path, want := range cases {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, diags := plan.Load(path, plan.Options{})
			if got := render(diags); !strings.Contains(got, path+": error: cannot read the plan: ") || !strings.Contains(got, want) {
				t.Errorf("plan: %s\nwant %q", got, want)
			}
			_, _, diags = plan.ReadVarFiles([]string{path})
			if got := render(diags); !strings.Contains(got, path+": error: cannot read the var file: ") || !strings.Contains(got, want) {
				t.Errorf("var file: %s\nwant %q", got, want)
			}
		})
	}
}
