package steps

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/plan"
)

func TestProgressLine(t *testing.T) {
	tests := map[string]struct {
		line, want string
	}{
		"TAO epoch line": {
			`{"date": "12/2/2026", "time": "9:4:7", "status": "RUNNING", "verbosity": "INFO", "message": "Training loop in progress", "epoch": 3, "max_epoch": 10, "time_per_epoch": "0:00:30.5", "eta": "0:04:00.123456", "kpi": {"loss": 0.2134567}}`,
			"epoch 3/10 loss 0.2135 eta 0:04:00",
		},
		"top-level loss":       {`{"epoch": 1, "max_epoch": 2, "loss": 1.5}`, "epoch 1/2 loss 1.5"},
		"no max_epoch":         {`{"epoch": 4}`, "epoch 4"},
		"kpi without loss":     {`{"epoch": 1, "max_epoch": 5, "kpi": {"mAP": 0.5, "acc": 0.25}}`, "epoch 1/5 acc 0.25"},
		"kpi named loss":       {`{"kpi": {"validation_loss": 0.3, "training_accuracy": 0.9}}`, "validation_loss 0.3"},
		"kpi loss preferred":   {`{"kpi": {"val_loss": 0.3, "loss": 0.4}}`, "loss 0.4"},
		"eta in seconds":       {`{"epoch": 2, "max_epoch": 3, "eta": 3725.5}`, "epoch 2/3 eta 1:02:05"},
		"eta with days":        {`{"eta": "1 day, 2:03:04.5"}`, "eta 1 day, 2:03:04"},
		"numeric strings":      {`{"epoch": "2", "max_epoch": "8"}`, "epoch 2/8"},
		"float epoch":          {`{"epoch": 2.0, "max_epoch": 8}`, "epoch 2/8"},
		"start message":        {`{"status": "STARTED", "message": "Starting Training Loop."}`, "Starting Training Loop."},
		"final message":        {`{"status": "SUCCESS", "message": "Training loop complete."}`, "Training loop complete."},
		"nothing to show":      {`{"status": "RUNNING"}`, ""},
		"junk":                 {`not json`, ""},
		"truncated line":       {`{"epoch": 3, "max_ep`, ""},
		"array":                {`[1, 2]`, ""},
		"empty":                {``, ""},
		"wrong types":          {`{"epoch": true, "max_epoch": null, "kpi": "x", "eta": {}}`, ""},
		"control chars in msg": {`{"message": "a\nb\tc"}`, "a b c"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := progressLine(tt.line, nil).Line; got != tt.want {
				t.Errorf("progressLine = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSecretEnv(t *testing.T) {
	s := New(Config{Secrets: testSecrets(t, "B", "bee value", "A", "a'$(x)`y`")})
	tests := map[string]struct {
		names     []string
		wantRead  []string // the names the prelude reads, in order
		wantStdin string
		wantErr   string
	}{
		"none": {},
		"in order, once": {
			names:     []string{"B", "A", "B"},
			wantRead:  []string{"B", "A"},
			wantStdin: "bee value\na'$(x)`y`\n",
		},
		"unresolved":   {names: []string{"A", "C"}, wantErr: "secret C has no value"},
		"invalid name": {names: []string{"A;rm"}, wantErr: `secret name "A;rm" is not a valid`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			prelude, stdin, err := s.secretEnv(tt.names)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if prelude != readSecrets(tt.wantRead) || string(stdin) != tt.wantStdin {
				t.Errorf("got %q, %q; want the prelude reading %q, %q", prelude, stdin, tt.wantRead, tt.wantStdin)
			}
			if strings.Contains(prelude, "bee value") {
				t.Errorf("a secret's value is in the prelude")
			}
			if tt.names == nil && stdin != nil {
				t.Errorf("stdin %q for no secrets, want nil", stdin)
			}
			// A shell reads the values back exactly.
			cmd := exec.Command("/bin/sh", "-c", prelude+`printf '%s|%s' "${B:-}" "${A:-}"`)
			cmd.Stdin = strings.NewReader(string(stdin))
			cmd.Env = []string{}
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.names) > 0 && string(out) != "bee value|a'$(x)`y`" {
				t.Errorf("the shell read %q", out)
			}
		})
	}
	// A stdin that ends early makes the script exit 97.
	prelude, _, _ := s.secretEnv([]string{"A", "B"})
	cmd := exec.Command("/bin/sh", "-c", prelude+"echo reached")
	cmd.Stdin = strings.NewReader("only-one\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitNoSecret || len(out) != 0 {
		t.Errorf("short stdin: %q, %v; want exit %d", out, err, exitNoSecret)
	}
}

// TestSecretEnvInstanceEnv: a secret the plan says is in the instance's
// environment (platform.instance_env) is neither read from stdin nor sent,
// and needs no value here.
func TestSecretEnvInstanceEnv(t *testing.T) {
	p, diags := plan.Parse("p.yaml", []byte(`taoflow: 1
name: p
platform: {kind: brev, transport: exec, instance_env: [NGC_KEY]}
secrets: [NGC_KEY, B]
instances: {gpu: {create: {type: g5.xlarge}}}
steps: [{id: pre, uses: preflight}]
`), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := New(Config{Plan: p, Secrets: testSecrets(t, "B", "bee value")})
	prelude, stdin, err := s.secretEnv([]string{"NGC_KEY", "B"})
	if err != nil {
		t.Fatal(err)
	}
	if prelude != readSecrets([]string{"B"}) || string(stdin) != "bee value\n" {
		t.Errorf("got %q, %q; want only B read and sent", prelude, stdin)
	}
	prelude, stdin, err = s.secretEnv([]string{"NGC_KEY"})
	if err != nil || prelude != "" || stdin != nil {
		t.Errorf("only an instance_env secret: %q, %q, %v; want nothing to send", prelude, stdin, err)
	}
}

func TestParseStatus(t *testing.T) {
	probes := []probe{{ID: "j0", Offset: 10}, {ID: "j1", Offset: 0}}
	tests := map[string]struct {
		out     string
		want    []observation
		wantErr string
	}{
		"two jobs after shell noise": {
			out: "motd line\n@job 0 running 0 0 65 20 5\nhello@status {\"epoch\": 1}\n@job 1 exited 3 1 2 0 0\n@status \n",
			want: []observation{
				{State: stateRunning, Age: 65 * time.Second, Log: []byte("hello"), More: true, Status: `{"epoch": 1}`},
				{State: stateExited, Code: 3, Canceled: true, Age: 2 * time.Second, Log: []byte{}},
			},
		},
		"status.json's end": {
			out: "@job 0 running 0 0 0 10 0\n@st {\"epoch\": 1}\r\n@st {\"epoch\": 2}\n@status {\"epoch\": 2}\n@job 1 exited 0 0 0 0 0\n@status \n",
			want: []observation{
				{State: stateRunning, Log: []byte{}, Status: `{"epoch": 2}`, StatusLines: []string{`{"epoch": 1}`, `{"epoch": 2}`}},
				{State: stateExited, Log: []byte{}},
			},
		},
		"log with newlines and @ lines": {
			out: "@job 0 vanished 0 0 0 15 5\n@job\n@status x\n@job 1 missing 0 0 0 0 0\n@status \n",
			want: []observation{
				{State: stateVanished, Log: []byte("@job\n"), Status: "x"},
				{State: stateMissing, Log: []byte{}},
			},
		},
		"unreadable exit code": {
			out: "@job 0 exited -1 0 0 10 0\n@status \n@job 1 exited 0 0 0 0 0\n@status \n",
			want: []observation{
				{State: stateExited, Code: -1, Log: []byte{}},
				{State: stateExited, Log: []byte{}},
			},
		},
		"short log":     {out: "@job 0 running 0 0 0 20 5\nhel", wantErr: "log ended"},
		"missing job":   {out: "@job 0 running 0 0 0 10 0\n@status \n", wantErr: "job 1: output ended early"},
		"wrong index":   {out: "@job 1 running 0 0 0 10 0\n@status \n", wantErr: "unexpected header"},
		"unknown state": {out: "@job 0 paused 0 0 0 10 0\n@status \n", wantErr: "unknown state"},
		"no status":     {out: "@job 0 running 0 0 0 10 0\n@job 1", wantErr: "missing status line"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStatus([]byte(tt.out), probes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(observation{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHomePath: scripts/home.sh reads a leading ~ or ~/ as $HOME and
// leaves everything else as it is, never evaluating it.
func TestHomePath(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"home":         {"~", "/h o"},
		"home slash":   {"~/", "/h o/"},
		"under home":   {"~/results/c 1", "/h o/results/c 1"},
		"absolute":     {"/data/x", "/data/x"},
		"tilde user":   {"~root/x", "~root/x"},
		"command text": {"~/$(touch pwned)", "/h o/$(touch pwned)"},
		"relative":     {"res", "res"},
		"empty":        {"", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", script(Params{"p": tt.in}, "home")+`tf_home "$p"; printf %s "$tf_h"`)
			cmd.Env = []string{"HOME=/h o"}
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("tf_home %q = %q, want %q", tt.in, out, tt.want)
			}
			if _, err := os.Stat(filepath.Join(cmd.Dir, "pwned")); err == nil {
				t.Errorf("tf_home %q ran a command", tt.in)
			}
		})
	}
}
