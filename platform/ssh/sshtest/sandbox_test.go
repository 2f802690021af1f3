package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddSandbox(t *testing.T) {
	s := Start(t)
	homes := map[string]string{}
	for _, alias := range []string{"box-a", "box-b"} {
		home, err := s.AddSandbox(alias)
		if err != nil {
			t.Fatal(err)
		}
		homes[alias] = home
	}
	// Multiplexed the way platform/ssh does it (one master per %C): each
	// alias still gets its own master, so its own HOME.
	ctl, err := os.MkdirTemp("", "tfsb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ctl)
	mux := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + ctl + "/%C", "-o", "ControlPersist=30"}
	defer func() {
		for alias := range homes {
			_ = exec.Command("ssh", append([]string{"-F", s.ConfigFile, "-O", "exit"}, append(mux, alias)...)...).Run()
		}
	}()
	for alias, home := range homes {
		args := append([]string{"-F", s.ConfigFile, "-o", "BatchMode=yes"}, mux...)
		out, err := exec.Command("ssh", append(args, alias,
			`echo "$HOME"; pwd; echo `+alias+` > ~/mark; echo "${TF_SANDBOX-unset}"`)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh %s: %v\n%s", alias, err, out)
		}
		want := home + "\n" + home + "\nunset\n"
		if string(out) != want {
			t.Errorf("ssh %s printed %q, want %q", alias, out, want)
		}
		b, err := os.ReadFile(filepath.Join(home, "mark"))
		if err != nil || strings.TrimSpace(string(b)) != alias {
			t.Errorf("%s: ~/mark = %q, %v; want it in its own sandbox", alias, b, err)
		}
	}
	// The plain alias still runs in the user's own home.
	out, err := exec.Command("ssh", "-F", s.ConfigFile, "-o", "BatchMode=yes", s.Alias, `echo "$HOME"`).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh %s: %v\n%s", s.Alias, err, out)
	}
	if own, _ := os.UserHomeDir(); strings.TrimSpace(string(out)) == homes["box-a"] || own == "" {
		t.Errorf("the plain alias ran in %q", out)
	}
}
