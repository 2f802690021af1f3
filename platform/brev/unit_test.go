package brev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/secret"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

func TestInstanceName(t *testing.T) {
	long := strings.Repeat("r", 80)
	tests := map[string]struct {
		run, instance string
		want          string // "" when only the properties are checked
	}{
		"plain":            {run: "20260701-abc", instance: "gpu-a", want: "tf-20260701-abc-gpu-a"},
		"dots underscores": {run: "r.1", instance: "a_b", want: "tf-r.1-a_b"},
		"exactly 63":       {run: strings.Repeat("x", 63-len("tf--a")), instance: "a", want: "tf-" + strings.Repeat("x", 63-len("tf--a")) + "-a"},
		"long run":         {run: long, instance: "gpu"},
		"long instance":    {run: "r", instance: long},
		"bad chars":        {run: "r", instance: "gpu a/b"},
		"unicode":          {run: "r", instance: "gpü"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := InstanceName(tc.run, tc.instance)
			if tc.want != "" && got != tc.want {
				t.Errorf("InstanceName(%q, %q) = %q, want %q", tc.run, tc.instance, got, tc.want)
			}
			if !nameRE.MatchString(got) || len(got) > 63 || !strings.HasPrefix(got, Prefix) {
				t.Errorf("InstanceName(%q, %q) = %q (%d bytes): not a valid brev name with prefix %q", tc.run, tc.instance, got, len(got), Prefix)
			}
			if !validName(got) {
				t.Errorf("validName(%q) = false", got)
			}
			if again := InstanceName(tc.run, tc.instance); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
	// Cut names end with 8 hex digits of a hash of the full name.
	if got := InstanceName(long, "gpu"); len(got) != 63 || !regexp.MustCompile(`-[0-9a-f]{8}$`).MatchString(got) {
		t.Errorf("long name %q (%d bytes): want 63 bytes ending in -<8 hex>", got, len(got))
	}
	// Names that differ only past the cut, or only in characters that are
	// replaced, stay different.
	pairs := [][2][2]string{
		{{long, "gpu-a"}, {long, "gpu-b"}},
		{{long + "1", "x"}, {long + "2", "x"}},
		{{"r", "a b"}, {"r", "a/b"}},
		{{"r", "a b"}, {"r", "a-b"}},
	}
	for _, p := range pairs {
		a, b := InstanceName(p[0][0], p[0][1]), InstanceName(p[1][0], p[1][1])
		if a == b {
			t.Errorf("InstanceName%q and InstanceName%q are both %q", p[0], p[1], a)
		}
	}
}

func TestParseList(t *testing.T) {
	one := Workspace{Name: "my-box", ID: "hclv1344v", Status: "RUNNING", BuildStatus: "COMPLETED", ShellStatus: "READY",
		HealthStatus: "HEALTHY", InstanceType: "g5.xlarge", InstanceKind: "gpu", GPU: "A10G"}
	obj := `{
  "workspaces": [
    {
      "name": "my-box",
      "id": "hclv1344v",
      "status": "RUNNING",
      "build_status": "COMPLETED",
      "shell_status": "READY",
      "health_status": "HEALTHY",
      "instance_type": "g5.xlarge",
      "instance_kind": "gpu",
      "gpu": "A10G"
    }
  ]
}
`
	arr := `[{"name":"my-box","id":"hclv1344v","status":"RUNNING","build_status":"COMPLETED","shell_status":"READY","health_status":"HEALTHY","instance_type":"g5.xlarge","instance_kind":"gpu","gpu":"A10G"}]`
	tests := map[string]struct {
		in      string
		want    []Workspace
		wantErr string
	}{
		"object":            {in: obj, want: []Workspace{one}},
		"array":             {in: arr, want: []Workspace{one}},
		"null":              {in: "null\n", want: nil},
		"workspaces null":   {in: `{"workspaces": null}`, want: nil},
		"with nodes":        {in: `{"workspaces": [], "nodes": [{"name":"n","org_id":"o","status":"x"}]}`, want: []Workspace{}},
		"empty":             {in: "  \n", wantErr: "printed nothing"},
		"garbage":           {in: "You are currently logged out, would you like to log in? [Y/n]: ", wantErr: "not JSON"},
		"banner then JSON":  {in: "A new version of brev has been released!\n[]", wantErr: "not JSON"},
		"object no key":     {in: `{"instances": []}`, wantErr: `without a "workspaces" key`},
		"truncated":         {in: `{"workspaces": [{"name": "a"`, wantErr: "malformed JSON"},
		"array of strings":  {in: `["a","b"]`, wantErr: "not a list of instances"},
		"workspaces string": {in: `{"workspaces": "x"}`, wantErr: `"workspaces" is not a list`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseList([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseList(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseList(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseList(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
	if _, err := ParseList([]byte("You are currently logged out, would you like to log in? [Y/n]: ")); err == nil || !strings.Contains(err.Error(), "brev login") {
		t.Errorf("a login prompt: %v; want a hint to run brev login", err)
	}
}

func TestCheckVersion(t *testing.T) {
	tests := map[string]struct {
		out, want, wantErr string
	}{
		"too old":        {out: "Current Version: v0.6.319\n", wantErr: "brev v0.6.319 is too old: taoflow needs brev v0.6.320 or newer"},
		"much older":     {out: "Current Version: v0.5.999\n", wantErr: "v0.5.999 is too old"},
		"minimum":        {out: "Current Version: v0.6.320\n", want: "v0.6.320"},
		"newer patch":    {out: "Current Version: v0.6.327\n", want: "v0.6.327"},
		"newer minor":    {out: "Current Version: v0.7.0\n", want: "v0.7.0"},
		"newer major":    {out: "Current Version: v1.0.0\n", want: "v1.0.0"},
		"describe form":  {out: "Current Version: v0.6.327-2-g12d39b75\n", want: "v0.6.327"},
		"no v":           {out: "Current Version: 0.6.330", want: "v0.6.330"},
		"dev build":      {out: "Current Version: dev\n", wantErr: "cannot read a version"},
		"empty":          {out: "", wantErr: "cannot read a version"},
		"two components": {out: "Current Version: v0.6", wantErr: "cannot read a version"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := checkVersion([]byte(tc.out))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("checkVersion(%q) = %q, %v; want an error saying %q", tc.out, got, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), MinVersion) {
					t.Errorf("error %q does not name the minimum %s", err, MinVersion)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("checkVersion(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
			}
		})
	}
}

func TestParseExecOutput(t *testing.T) {
	const nonce, name = "0123456789abcdef", "tf-run-gpu"
	m := "\n__TAOFLOW_RC_" + nonce + "="
	other := "\n__TAOFLOW_RC_fedcba9876543210="
	tests := map[string]struct {
		out     string
		want    string
		wantRC  int
		wantNot bool
	}{
		"output and name":      {out: "hello\n" + m + "0\n" + name + "\n", want: "hello\n", wantRC: 0},
		"exit 7":               {out: "x\n" + m + "7\n" + name + "\n", want: "x\n", wantRC: 7},
		"no output":            {out: m + "0\n" + name + "\n", want: "", wantRC: 0},
		"no final newline":     {out: "partial" + m + "3\n" + name + "\n", want: "partial", wantRC: 3},
		"name glued":           {out: "out\n" + m + "42" + name + "\n", want: "out\n", wantRC: 42},
		"name glued no nl":     {out: "out\n" + m + "42" + name, want: "out\n", wantRC: 42},
		"no name":              {out: "out\n" + m + "255\n", want: "out\n", wantRC: 255},
		"name starts w/ digit": {out: "out\n" + m + "1\n" + "9box\n", want: "out\n", wantRC: 1},
		"marker last":          {out: "a\n" + m + "1\n" + "b\n" + m + "0\n" + name + "\n", want: "a\n" + m + "1\nb\n", wantRC: 0},
		"fake marker other nonce": {
			out: "x" + other + "9\ny\n" + m + "5\n" + name + "\n", want: "x" + other + "9\ny\n", wantRC: 5,
		},
		"only other nonce":        {out: "x" + other + "0\n" + name + "\n", wantNot: true},
		"absent":                  {out: "hello\n" + name + "\n", wantNot: true},
		"empty":                   {out: "", wantNot: true},
		"marker no digits":        {out: "x" + m + "\n" + name + "\n", wantNot: true},
		"marker out of range":     {out: "x" + m + "300\n", wantNot: true},
		"background output after": {out: "x" + m + "2\nlate line\n" + name + "\n", want: "x", wantRC: 2},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			got, rc, ok := parseExecOutput([]byte(tc.out), nonce, name)
			if tc.wantNot {
				if ok {
					t.Fatalf("parseExecOutput(%q) = %q, %d, true; want no marker", tc.out, got, rc)
				}
				return
			}
			if !ok || string(got) != tc.want || rc != tc.wantRC {
				t.Fatalf("parseExecOutput(%q) = %q, %d, %v; want %q, %d, true", tc.out, got, rc, ok, tc.want, tc.wantRC)
			}
		})
	}
	// Name glued to a number, when the name begins with digits.
	if got, rc, ok := parseExecOutput([]byte("o"+m+"127box\n"), nonce, "7box"); !ok || rc != 12 || string(got) != "o" {
		t.Errorf("glued digit name: %q, %d, %v; want \"o\", 12, true", got, rc, ok)
	}
}

// TestWrapScript runs the wrapper through a local shell, as the remote
// login shell would, and parses its output.
func TestWrapScript(t *testing.T) {
	const nonce = "00ff00ff00ff00ff"
	tests := map[string]struct {
		script string
		want   string
		rc     int
	}{
		"exit code":        {script: "echo out; exit 7", want: "out\n", rc: 7},
		"no final newline": {script: "printf abc", want: "abc", rc: 0},
		"quotes":           {script: `echo "it's" '$HOME'`, want: "it's $HOME\n", rc: 0},
		"signal":           {script: "kill -9 $$", want: "", rc: 137},
		"exit in script":   {script: "exit 3; echo never", want: "", rc: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := wrapScript(tc.script, nonce)
			out, err := execCommand("/bin/sh", "-c", cmd)
			if err != nil {
				t.Fatalf("sh -c %q: %v", cmd, err)
			}
			// brev prints the name after the output.
			got, rc, ok := parseExecOutput(append(out, "tf-x\n"...), nonce, "tf-x")
			if !ok || string(got) != tc.want || rc != tc.rc {
				t.Fatalf("wrapped %q printed %q: parsed %q, %d, %v; want %q, %d", tc.script, out, got, rc, ok, tc.want, tc.rc)
			}
		})
	}
}

func TestSplitLines(t *testing.T) {
	in := "Attempting to create 1 instance(s)\r⠋ Creating\r⠙ Creating\r\x1b[K\n\n  error: duplicate workspace  \r\n"
	want := []string{"Attempting to create 1 instance(s)", "⠋ Creating", "⠙ Creating", "error: duplicate workspace"}
	if diff := cmp.Diff(want, splitLines([]byte(in))); diff != "" {
		t.Errorf("splitLines mismatch (-want +got):\n%s", diff)
	}
	stderr := "1 error occurred:\n\t* [error] \ngithub.com/brevdev/brev-cli/pkg/cmd/delete.deleteWorkspace\n" +
		"/home/runner/work/brev-cli/brev-cli/pkg/cmd/delete/delete.go:87\n: [error] \n: instance with id/name foo not found\r⠋ \r"
	if got, want := summary(nil, []byte(stderr), nil), "1 error occurred: | ⠋"; !strings.Contains(got, "instance with id/name foo not found") || strings.Contains(got, "delete.go") {
		t.Errorf("summary = %q; want the message without stack frames (like %q)", got, want)
	}
}

func TestIsEmpty(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		r    io.Reader
		want bool
	}{
		"nil":             {nil, true},
		"empty string":    {strings.NewReader(""), true},
		"string":          {strings.NewReader("secret"), false},
		"plain empty":     {iotest.OneByteReader(strings.NewReader("")), true},
		"plain non-empty": {iotest.OneByteReader(strings.NewReader("x")), false},
	} {
		if got, err := isEmpty(ctx, tc.r); err != nil || got != tc.want {
			t.Errorf("%s: isEmpty = %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if _, err := isEmpty(ctx, iotest.ErrReader(errors.New("boom"))); err == nil {
		t.Error("a failing reader counted as empty")
	}
	// A reader that never returns is bounded by ctx.
	pr, pw := io.Pipe()
	defer pw.Close()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := isEmpty(cctx, pr); err == nil {
		t.Error("isEmpty of a blocked reader with a cancelled ctx returned no error")
	}
}

func execCommand(name string, args ...string) ([]byte, error) {
	return osexec.Command(name, args...).Output()
}

func TestNew(t *testing.T) {
	for name, cfg := range map[string]Config{
		"bad transport":    {Transport: "rsh", Home: "/h"},
		"negative timeout": {CreateTimeout: -1, Home: "/h"},
		"relative home":    {Home: "h"},
		"no home for ssh":  {Env: []string{"PATH=/bin"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New(%+v) succeeded", name, cfg)
		}
	}
	b, err := New(Config{Env: []string{"PATH=/bin", "HOME=/home/u", "BREV_FEATURE_SHOW_VERSION_ON_RUN=true"}, Transport: TransportExec})
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind() != "brev" || b.cfg.PollInterval != 5*time.Second || b.cfg.CreateTimeout != 20*time.Minute ||
		b.cfg.DeleteTimeout != 12*time.Minute || b.cfg.CallTimeout != 2*time.Minute || b.cfg.Binary != "brev" {
		t.Errorf("defaults: %+v", b.cfg)
	}
	want := []string{"PATH=/bin", "HOME=/home/u", "BREV_NO_ANALYTICS=1", "SSH_AUTH_SOCK=/dev/null"}
	if diff := cmp.Diff(want, b.env); diff != "" {
		t.Errorf("brev's environment (-want +got):\n%s", diff)
	}
	// Home given: brev runs with it as HOME; the ssh config is under it.
	b, err = New(Config{Env: []string{"HOME=/home/u", "SSH_AUTH_SOCK=/run/agent"}, Home: "/other"})
	if err != nil {
		t.Fatal(err)
	}
	if got := getenv(b.env, "HOME"); got != "/other" {
		t.Errorf("HOME = %q, want /other", got)
	}
	if got := getenv(b.env, "SSH_AUTH_SOCK"); got != "/run/agent" {
		t.Errorf("SSH_AUTH_SOCK = %q, want the caller's", got)
	}
	if b.sshCfg.ConfigFile != "/other/.ssh/config" || b.sshCfg.Run != b.cfg.Run {
		t.Errorf("ssh config %+v; want brev's config file under Home", b.sshCfg)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "brev")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := lookPath("brev", "/nonexistent:"+dir); err != nil || got != bin {
		t.Errorf("lookPath = %q, %v; want %q", got, err, bin)
	}
	if _, err := lookPath("brev", "/nonexistent"); err == nil || !strings.Contains(err.Error(), "not found on PATH") {
		t.Errorf("lookPath on a PATH without brev: %v", err)
	}
	if got, err := lookPath(bin, ""); err != nil || got != bin {
		t.Errorf("lookPath(%q) = %q, %v", bin, got, err)
	}
	if _, err := lookPath(dir, ""); err == nil {
		t.Error("a directory was taken for the brev binary")
	}
}

// TestCallTimeout shows that a brev call that hangs is killed, with the
// processes it started, after CallTimeout.
func TestCallTimeout(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := `#!/bin/sh
case "$1" in
--version) echo "Current Version: v0.6.327" ;;
ls) echo $$ > ` + pidFile + `; sleep 60 & sleep 60; wait ;;
esac
`
	bin := filepath.Join(dir, "brev")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Binary: bin, Home: dir, Transport: TransportExec, CallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	_, err = b.List(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Errorf("List of a hanging brev: %v; want the call timeout", err)
	}
	b2, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b2)))
	if err != nil {
		t.Fatal(err)
	}
	// The shell led its own process group; nothing of it is left (once
	// init has reaped the orphaned sleeps).
	testrig.Eventually(t, 5*time.Second, "process group "+strconv.Itoa(pid)+" to be gone", func() bool {
		return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
	})
}

// TestSummaryKeepsCause: brev create's cause ("unexpected EOF") comes
// before the lines it prints after (a next type, "Only created 0/1"); the
// summary of the failure leads with it.
func TestSummaryKeepsCause(t *testing.T) {
	stderr := "Attempting to create 1 instance(s) with 1 parallel attempts\n" +
		"Trying g5.xlarge for 1 instance(s)...\n" +
		"[Worker 1] g5.xlarge Failed: RESTY Post \"https://x/api/organizations/o/workspaces\": unexpected EOF\n" +
		"Trying g5.2xlarge for 1 instance(s)...\n" +
		"[Worker 1] Trying g5.2xlarge for instance 'tf-r-gpu'...\n\r⠋ Creating instance...\r\x1b[K" +
		"[Worker 1] g5.2xlarge Failed: duplicate workspace: a workspace named 'tf-r-gpu' already exists\n" +
		"Warning: Only created 0/1 instances\n" +
		"could only create 0/1 instances\n"
	got := summary(nil, []byte(stderr), nil)
	if !strings.Contains(got, "unexpected EOF") || !strings.HasSuffix(got, "could only create 0/1 instances") {
		t.Errorf("summary = %q; want the cause (unexpected EOF) and the last line", got)
	}
}

// TestSummaryRedactsBeforeClip: a secret across the 300-byte clip of a
// line of what brev printed (brev exec's stderr is the remote command's)
// leaves no piece of itself in the summary.
func TestSummaryRedactsBeforeClip(t *testing.T) {
	const key = "nvapi-Summ4ryStr4ddl3sTheCl1p0123456789ab"
	red := secret.NewRedactor(key)
	line := strings.Repeat("e", 280) + key + " failed"
	got := summary(red, []byte("error: something\n"+line+"\n"), nil)
	for i := 0; i+8 <= len(key); i++ {
		if strings.Contains(got, key[i:i+8]) {
			t.Fatalf("summary = %q holds %q, a piece of the secret", got, key[i:i+8])
		}
	}
	if !strings.Contains(got, strings.Repeat("e", 280)+"***") {
		t.Errorf("summary = %q; want the line up to the redacted secret", got)
	}
}

// TestStagedScript runs the commands of a staged script (pieces, then the
// run) through a local shell, as the remote login shell would: the script
// runs whole and leaves no staging directory; a missing or corrupt piece
// runs nothing, says so with the short marker, and leaves nothing; a piece
// written twice (a replay) changes nothing.
func TestStagedScript(t *testing.T) {
	const nonce = "00ff00ff00ff00ff"
	// Random-looking lines compress badly: several pieces.
	var text strings.Builder
	for i := 0; text.Len() < 300<<10; i++ {
		fmt.Fprintf(&text, "%x '%d' \"$x\"\n", uint64(i)*0x9e3779b97f4a7c15, i)
	}
	script := "cat <<'EOF'\n" + text.String() + "EOF\necho \"$#\"; exit 5"
	pieces, err := stagePieces(script)
	if err != nil || len(pieces) < 2 {
		t.Fatalf("stagePieces = %d pieces, %v; want several", len(pieces), err)
	}
	run := func(t *testing.T, tmp, command string) []byte {
		t.Helper()
		if n := brevArgLen(command); n > maxExecArg {
			t.Errorf("a command is %d bytes quoted, over %d", n, maxExecArg)
		}
		cmd := osexec.Command("/bin/sh", "-c", command)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh -c: %v", err)
		}
		return out
	}
	for name, tc := range map[string]struct {
		skip, corrupt, twice int // a piece index, or -1
		want                 string
		rc                   int
		short                bool
	}{
		"whole":           {skip: -1, corrupt: -1, twice: -1, want: text.String() + "0\n", rc: 5},
		"piece run twice": {skip: -1, corrupt: -1, twice: 1, want: text.String() + "0\n", rc: 5},
		"missing piece":   {skip: 1, corrupt: -1, twice: -1, short: true},
		"corrupt piece":   {skip: -1, corrupt: 0, twice: -1, short: true},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			for k, p := range pieces {
				if k == tc.skip {
					continue
				}
				if k == tc.corrupt {
					p = "AAAA" + p[4:]
				}
				for range 1 + btoi(k == tc.twice) {
					out, rc, ok := parseExecOutput(run(t, tmp, pieceCommand(nonce, k, p)), nonce, "")
					if !ok || rc != 0 || len(out) != 0 {
						t.Fatalf("piece %d: %q, rc %d, %v", k, out, rc, ok)
					}
				}
			}
			if fi, err := os.Stat(filepath.Join(tmp, ".taoflow-"+nonce+".d")); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("staging directory: %v, %v; want mode 0700", fi, err)
			}
			raw := run(t, tmp, runStagedCommand(nonce, len(pieces)))
			out, rc, ok := parseExecOutput(raw, nonce, "")
			switch {
			case tc.short && (ok || !strings.Contains(string(raw), shortMarker(nonce))):
				t.Errorf("a staged script with a bad piece printed %.200q; want the short marker and no exit code", raw)
			case !tc.short && (!ok || rc != tc.rc || string(out) != tc.want):
				t.Errorf("staged script: %d bytes of output (right: %v), rc %d, %v; want rc %d", len(out), string(out) == tc.want, rc, ok, tc.rc)
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, ".taoflow-*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
