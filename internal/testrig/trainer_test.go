package testrig

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// statusLine is the part of a status.json line the tests check.
type statusLine struct {
	Status   string
	Epoch    *int
	MaxEpoch *int `json:"max_epoch"`
	ETA      string
	Time     string
	Date     string
	KPI      map[string]float64
}

func readStatus(t *testing.T, path string) []statusLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("status.json: %v", err)
	}
	defer f.Close()
	var lines []statusLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l statusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("status.json line %q: %v", sc.Text(), err)
		}
		if l.Date == "" || l.Time == "" {
			t.Errorf("status.json line %q lacks date or time", sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// summary reduces status lines to "STATUS epoch/max" strings for cmp.
func summary(t *testing.T, lines []statusLine) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		s := l.Status
		if l.Epoch != nil {
			s += fmt.Sprintf(" %d/%d", *l.Epoch, *l.MaxEpoch)
			if _, ok := l.KPI["loss"]; !ok || l.ETA == "" {
				t.Errorf("epoch line %+v lacks kpi.loss or eta", l)
			}
		}
		out = append(out, s)
	}
	return out
}

func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestTrainerRun(t *testing.T) {
	img := BuildTrainerImage(t, "")
	user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())

	cases := map[string]struct {
		dockerArgs   []string
		env          []string
		args         []string
		wantCode     int
		wantStatus   []string
		wantFiles    []string
		wantOut      []string
		wantNotInOut []string
	}{
		"two epochs succeed": {
			args:       []string{"-epochs", "2", "-sleep", "10ms"},
			wantStatus: []string{"RUNNING 1/2", "SUCCESS 2/2"},
			wantFiles:  []string{"model_epoch_000_step_00010.pth", "model_epoch_001_step_00020.pth", "status.json"},
			wantOut:    []string{"Epoch 1/2: loss=", "Epoch 2/2: loss=", "trainer: done"},
		},
		"fail code after the epochs": {
			args:       []string{"-epochs", "1", "-sleep", "10ms", "-fail-code", "3"},
			wantCode:   3,
			wantStatus: []string{"RUNNING 1/1", "FAILURE"},
			wantFiles:  []string{"model_epoch_000_step_00010.pth", "status.json"},
		},
		"fail at epoch": {
			args:       []string{"-epochs", "5", "-sleep", "10ms", "-fail-at", "1", "-fail-code", "7"},
			wantCode:   7,
			wantStatus: []string{"RUNNING 1/5", "FAILURE"},
			wantFiles:  []string{"model_epoch_000_step_00010.pth", "status.json"},
		},
		"flags from the environment": {
			dockerArgs: []string{"-e", "TRAINER_EPOCHS=3", "-e", "TRAINER_SLEEP=1ms"},
			wantStatus: []string{"RUNNING 1/3", "RUNNING 2/3", "SUCCESS 3/3"},
			wantFiles:  []string{"model_epoch_000_step_00010.pth", "model_epoch_001_step_00020.pth", "model_epoch_002_step_00030.pth", "status.json"},
		},
		"print env tells length only": {
			// -e NAME without a value: docker copies it from the CLI's
			// environment, as taoflow's run step does. A NAME unset there
			// stays unset in the container (docker client 28).
			dockerArgs:   []string{"-e", "TESTRIG_FAKE_SECRET", "-e", "TESTRIG_UNSET"},
			env:          []string{"TESTRIG_FAKE_SECRET=fake-value-17bytes"},
			args:         []string{"-epochs", "0", "-print-env", "TESTRIG_FAKE_SECRET", "-print-env", "TESTRIG_UNSET", "-print-env", "TESTRIG_ABSENT"},
			wantFiles:    []string{"status.json"},
			wantOut:      []string{"TESTRIG_FAKE_SECRET has 18 bytes", "TESTRIG_UNSET is unset", "TESTRIG_ABSENT is unset"},
			wantNotInOut: []string{"fake-value-17bytes"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			label := "taoflow.testrig=" + UniqueName(t)
			NoLeftovers(t, label)
			results := t.TempDir()
			args := []string{"run", "--rm", "--label", label, "--user", user, "-v", results + ":/results"}
			args = append(args, tc.dockerArgs...)
			args = append(append(args, img), tc.args...)
			out, err := DockerEnv(t, tc.env, nil, args...)
			if got := ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d, want %d (%v)\n%s", got, tc.wantCode, err, out)
			}
			if diff := cmp.Diff(tc.wantStatus, summary(t, readStatus(t, filepath.Join(results, "status.json")))); diff != "" {
				t.Errorf("status.json (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFiles, fileNames(t, results)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			for _, s := range tc.wantOut {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.wantNotInOut {
				if strings.Contains(out, s) {
					t.Errorf("output contains %q:\n%s", s, out)
				}
			}
		})
	}
}

// inspectState returns "Status|ExitCode|OOMKilled" of a container.
func inspectState(t *testing.T, name string) string {
	t.Helper()
	out, err := Docker(t, "inspect", "--format", "{{.State.Status}}|{{.State.ExitCode}}|{{.State.OOMKilled}}", name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startDetached runs the image detached under a unique name and label and
// removes the container at cleanup (before NoLeftovers checks).
func startDetached(t *testing.T, img string, dockerArgs []string, args ...string) string {
	t.Helper()
	name := UniqueName(t)
	label := "taoflow.testrig=" + name
	NoLeftovers(t, label)
	runArgs := append([]string{"run", "-d", "--name", name, "--label", label}, dockerArgs...)
	runArgs = append(append(runArgs, img), args...)
	if _, err := Docker(t, runArgs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := Docker(t, "rm", "-f", name); err != nil {
			t.Errorf("removing %s: %v", name, err)
		}
	})
	return name
}

// waitLog polls the container's log until it contains want.
func waitLog(t *testing.T, name, want string) {
	t.Helper()
	var out string
	var err error
	if !Within(30*time.Second, func() bool {
		out, err = Docker(t, "logs", name)
		return err == nil && strings.Contains(out, want)
	}) {
		t.Fatalf("%s: log never showed %q: %v\n%s", name, want, err, out)
	}
}

// waitExited polls until the container has exited.
func waitExited(t *testing.T, name string) {
	t.Helper()
	if _, err := Docker(t, "wait", name); err != nil {
		t.Fatal(err)
	}
}

func TestTrainerStop(t *testing.T) {
	img := BuildTrainerImage(t, "")
	cases := map[string]struct {
		args      []string
		stopAfter string
		want      string
	}{
		"SIGTERM exits 143":             {args: nil, stopAfter: "5", want: "exited|143|false"},
		"ignored SIGTERM is killed 137": {args: []string{"-ignore-term"}, stopAfter: "2", want: "exited|137|false"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := startDetached(t, img, nil, append([]string{"-epochs", "1", "-sleep", "1ms", "-hang", "-results", "/tmp/r"}, tc.args...)...)
			waitLog(t, c, "trainer: hanging") // the handler is installed by now
			if got := inspectState(t, c); !strings.HasPrefix(got, "running|") {
				t.Fatalf("state %s before stop, want running", got)
			}
			if _, err := Docker(t, "stop", "-t", tc.stopAfter, c); err != nil {
				t.Fatal(err)
			}
			if got := inspectState(t, c); got != tc.want {
				t.Errorf("state %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTrainerOOM(t *testing.T) {
	img := BuildTrainerImage(t, "")
	c := startDetached(t, img, []string{"--memory", "32m", "--memory-swap", "32m"}, "-oom-mb", "200", "-epochs", "1", "-results", "/tmp/r")
	waitExited(t, c)
	if got, want := inspectState(t, c), "exited|137|true"; got != want {
		out, _ := Docker(t, "logs", c)
		t.Errorf("state %s, want %s\n%s", got, want, out)
	}
}
