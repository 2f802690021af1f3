package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// TestBrevValuesCheckedBeforeAnything: the sweep example with a var that
// only fails where it is used (poll=30 as a wait interval, min_gpus=one as
// a GPU count) is refused by validate, plan and apply with exit 2, at the
// expression, naming the --var; brev is never called.
func TestBrevValuesCheckedBeforeAnything(t *testing.T) {
	example, err := filepath.Abs("../../examples/plans/sweep-brev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := brevEnv(t, brevtest.Options{})
	t.Setenv("NGC_KEY", "nvapi-not-a-real-key-but-long-enough")
	t.Setenv("AWS_ACCESS_KEY_ID", "not-a-real-access-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret-key")
	cases := map[string]struct {
		vars []string
		want string
	}{
		"poll=30": {[]string{"--var", "poll=30"},
			`sweep-brev.yaml:72:37: error: steps[4].with.interval: "30" is not a duration (use Go syntax such as 90s, 10m, 1h30m); vars.poll is "30" (from --var poll=30)`},
		"min_gpus=one": {[]string{"--var", "min_gpus=one"},
			`sweep-brev.yaml:37:19: error: steps[0].with.gpus: expected an integer, got a string; vars.min_gpus is "one" (from --var min_gpus=one)`},
	}
	for name, tc := range cases {
		for _, cmd := range [][]string{{"validate"}, {"plan"}, {"apply", "--yes"}} {
			t.Run(name+"/"+cmd[0], func(t *testing.T) {
				args := append(append(append([]string{}, cmd...), example), tc.vars...)
				code, _, errOut := applyCLI(t, args...)
				if code != exitUsage {
					t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut)
				}
				if !strings.Contains(errOut, tc.want) {
					t.Errorf("stderr lacks\n%s\ngot:\n%s", tc.want, errOut)
				}
			})
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("brev was called %d times; want none: %v", len(calls), calls)
	}
}

// TestApplyAsksBeforeBilling: an apply that would create brev instances
// asks on a terminal, refuses without one (exit 2, brev never called), and
// goes on with --yes or a "y"; a plan that creates nothing never asks.
func TestApplyAsksBeforeBilling(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "billed.yaml", `taoflow: 1
name: billed
platform: brev
instances:
  a: {create: {type: "g5.xlarge,g5.2xlarge"}}
  b: {create: {type: "g5.xlarge,g5.2xlarge"}}
  c: {create: {type: g6.xlarge}}
steps:
  - {id: pre, uses: preflight, with: {interval: 100ms}}
finally:
  - {id: teardown, uses: delete}
`)
	writePlan(t, "existing.yaml", `taoflow: 1
name: existing
platform: brev
instances:
  box: {existing: my-box}
steps:
  - {id: pre, uses: preflight, with: {interval: 100ms, ready_timeout: 1s}}
`)
	ask := func(t *testing.T, terminal bool, answer string, args ...string) (int, string) {
		t.Helper()
		old := isTerminal
		isTerminal = func(io.Reader) bool { return terminal }
		defer func() { isTerminal = old }()
		var out, errOut strings.Builder
		code := exitCode(run(t.Context(), args, stdio{in: strings.NewReader(answer), out: &out, err: &errOut}), &errOut)
		return code, errOut.String()
	}
	const what = "3 Brev instances (a, b: g5.xlarge,g5.2xlarge; c: g6.xlarge; ~$3.40/h at list prices)"

	code, errOut := ask(t, false, "", "apply", "--output", "plain", "billed.yaml")
	if code != exitUsage || !strings.Contains(errOut, "refusing to create "+what+" without --yes") {
		t.Errorf("no terminal: exit %d, stderr:\n%s", code, errOut)
	}
	code, errOut = ask(t, true, "n\n", "apply", "--output", "plain", "billed.yaml")
	if code != exitUsage || !strings.Contains(errOut, "Create "+what+"? They bill until taoflow deletes them. [y/N] ") || !strings.Contains(errOut, "nothing created") {
		t.Errorf("answered no: exit %d, stderr:\n%s", code, errOut)
	}
	code, errOut = ask(t, true, "\n", "apply", "--output", "plain", "billed.yaml")
	if code != exitUsage || !strings.Contains(errOut, "nothing created") {
		t.Errorf("answered nothing: exit %d, stderr:\n%s", code, errOut)
	}
	// Before the answer brev may only be asked what it offers (the
	// question carries the prices): nothing that creates or changes.
	for _, c := range f.Calls() {
		if c.Command != "version" && c.Command != "search" {
			t.Fatalf("brev %s called before the answer: %v", c.Command, c.Args)
		}
	}
	code, errOut = ask(t, true, "y\n", "apply", "--output", "plain", "billed.yaml")
	if code != exitOK || !strings.Contains(errOut, "[y/N]") {
		t.Errorf("answered yes: exit %d, stderr:\n%s", code, errOut)
	}
	code, errOut = ask(t, false, "", "apply", "-y", "--output", "plain", "billed.yaml")
	if code != exitOK || strings.Contains(errOut, "[y/N]") {
		t.Errorf("-y: exit %d, stderr:\n%s", code, errOut)
	}
	// Only existing instances: nothing is created, nothing asked.
	code, errOut = ask(t, false, "", "apply", "--output", "plain", "existing.yaml")
	if strings.Contains(errOut, "[y/N]") || strings.Contains(errOut, "--yes") {
		t.Errorf("a plan that creates nothing asked: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestRetryBackoffEnv: a TAOFLOW_RETRY_BACKOFF that is not a positive
// duration is a usage error, before the command does anything.
func TestRetryBackoffEnv(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, v := range []string{"soon", "-1s", "0"} {
		t.Setenv("TAOFLOW_RETRY_BACKOFF", v)
		code, _, errOut := applyCLI(t, "status")
		if code != exitUsage || !strings.Contains(errOut, "TAOFLOW_RETRY_BACKOFF") {
			t.Errorf("TAOFLOW_RETRY_BACKOFF=%s: exit %d, %q; want 2 naming the variable", v, code, errOut)
		}
	}
	t.Setenv("TAOFLOW_RETRY_BACKOFF", "10ms")
	if code, _, errOut := applyCLI(t, "status"); code == exitUsage {
		t.Errorf("TAOFLOW_RETRY_BACKOFF=10ms: exit 2: %s", errOut)
	}
}

// TestApplyAsksBeforeAPlanProgram (issue 22 item 1): a plan naming its own
// brev CLI (platform.binary: ./tools/brev) has apply ask on a terminal,
// before anything runs, with the program's full path in the question; no
// runs nothing; yes runs it (then the billing question follows); -y and
// no terminal refuse unless --brev-binary names it.
func TestApplyAsksBeforeAPlanProgram(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "tools", "brev")
	wrapper := "#!/bin/sh\necho \"$*\" >> '" + marker + "'\nexec '" + f.Binary + "' \"$@\"\n"
	if err := os.WriteFile(prog, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	writePlan(t, "own.yaml", `taoflow: 1
name: own
platform: {kind: brev, binary: ./tools/brev}
instances:
  a: {create: {type: g5.xlarge}}
steps:
  - {id: pre, uses: preflight, with: {interval: 100ms}}
finally:
  - {id: teardown, uses: delete}
`)
	ask := func(terminal bool, answer string, args ...string) (int, string) {
		t.Helper()
		old := isTerminal
		isTerminal = func(io.Reader) bool { return terminal }
		defer func() { isTerminal = old }()
		var out, errOut strings.Builder
		code := exitCode(run(t.Context(), args, stdio{in: strings.NewReader(answer), out: &out, err: &errOut}), &errOut)
		return code, errOut.String()
	}
	ran := func() bool { _, err := os.Stat(marker); return err == nil }
	question := "The plan names its own brev CLI (platform.binary: ./tools/brev). Run the program " + prog + ", with your brev login and environment? [y/N] "

	code, errOut := ask(true, "n\n", "apply", "--output", "plain", "own.yaml")
	if code != exitUsage || !strings.Contains(errOut, question) || !strings.Contains(errOut, "nothing run") || ran() {
		t.Errorf("answered no: exit %d, ran %v, stderr:\n%s", code, ran(), errOut)
	}
	for _, args := range [][]string{{"-y"}, {}} {
		code, errOut = ask(false, "", append([]string{"apply", "--output", "plain", "own.yaml"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "--brev-binary "+prog) || ran() {
			t.Errorf("%v without a terminal: exit %d, ran %v, stderr:\n%s", args, code, ran(), errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".taoflow")); err == nil {
		t.Errorf("a refused apply recorded a state")
	}
	code, errOut = ask(true, "y\ny\n", "apply", "--output", "plain", "own.yaml")
	if code != exitOK || !strings.Contains(errOut, question) || !strings.Contains(errOut, "Create 1 Brev instance") || !ran() {
		t.Errorf("answered yes twice: exit %d, ran %v, stderr:\n%s", code, ran(), errOut)
	}
	_ = os.Remove(marker)
	code, errOut = ask(false, "", "apply", "-y", "--brev-binary", "tools/brev", "--output", "plain", "own.yaml")
	if code != exitOK || strings.Contains(errOut, "[y/N]") || !ran() {
		t.Errorf("-y --brev-binary: exit %d, ran %v, stderr:\n%s", code, ran(), errOut)
	}
}
