package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/state"
)

// recordRun writes, into the state in the working directory, a run whose
// apply died and one instance it created, with the given resource data, as
// anyone able to write a state.db could.
func recordRun(t *testing.T, run string, r state.Run, platform string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	store, err := state.Open(".taoflow")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r.ID, r.Name, r.StartedAt = run, "forged", time.Now()
	if r.State == "" {
		r.State, r.Host = state.RunRunning, "elsewhere"
	}
	if err := store.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	id, err := store.RecordIntent(ctx, state.Resource{RunID: run, Kind: state.KindInstance, Name: "gpu", Instance: "gpu",
		Platform: platform, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MarkCreated(ctx, id, data); err != nil {
		t.Fatal(err)
	}
}

// TestForgedStateRunsNothing: a state.db that names a program (the brev
// binary) or an ssh config with a ProxyCommand is refused by destroy and
// cancel with exit 2 saying how to confirm it, and the program never runs.
func TestForgedStateRunsNothing(t *testing.T) {
	tests := map[string]struct {
		platform string
		data     func(dir, marker string) map[string]string
		flag     string
	}{
		"brev binary": {"brev", func(dir, marker string) map[string]string {
			prog := filepath.Join(dir, "evil")
			if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			return map[string]string{"ref": "tf-forged-gpu", "pf.binary": prog}
		}, "--brev-binary " + "DIR/evil"},
		"ssh config with ProxyCommand": {"ssh", func(dir, marker string) map[string]string {
			cfg := filepath.Join(dir, "ssh_config")
			if err := os.WriteFile(cfg, []byte("Host *\n  ProxyCommand sh -c 'touch "+marker+"'\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return map[string]string{"ref": "somehost", "pf.ssh_config": cfg}
		}, "--ssh-config " + "DIR/ssh_config"},
	}
	for name, tt := range tests {
		for _, verb := range []string{"destroy", "cancel"} {
			t.Run(name+"/"+verb, func(t *testing.T) {
				dir := t.TempDir()
				t.Chdir(dir)
				marker := filepath.Join(dir, "ran")
				const run = "forged-0101-000000-aaaa"
				recordRun(t, run, state.Run{}, tt.platform, tt.data(dir, marker))
				args := []string{verb, run}
				if verb == "destroy" {
					args = append(args, "--yes")
				}
				code, out, errOut := applyCLI(t, args...)
				if code != exitUsage {
					t.Errorf("%s exit %d, want %d\n%s%s", verb, code, exitUsage, out, errOut)
				}
				if want := strings.ReplaceAll(tt.flag, "DIR", dir); !strings.Contains(errOut, want) {
					t.Errorf("%s does not say to confirm with %q:\n%s", verb, want, errOut)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("%s ran the program the state named", verb)
				}
			})
		}
	}
}

// TestUnsafeStateRefusedCLI: a state directory others can write is refused
// with exit 2 by the commands that read it, saying why.
func TestUnsafeStateRefusedCLI(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	recordRun(t, "mine-0101-000000-aaaa", state.Run{State: state.RunFailed}, "local", map[string]string{"ref": filepath.Join(dir, "nothing")})
	if err := os.Chmod(".taoflow", 0o777); err != nil {
		t.Fatal(err)
	}
	writePlan(t, "p.yaml", "taoflow: 1\nname: p\ninstances: {a: {}}\nsteps:\n  - id: pre\n    uses: preflight\n")
	for _, args := range [][]string{{"destroy", "--all", "--yes"}, {"cancel", "mine"}, {"status"}, {"logs", "mine"}, {"apply", "p.yaml"}} {
		code, out, errOut := applyCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "writable by group or others (mode 0777)") {
			t.Errorf("%s: exit %d, want %d saying why\n%s%s", strings.Join(args, " "), code, exitUsage, out, errOut)
		}
	}
}

// TestCancelReusedPID: cancel of a run whose apply died, its pid now held
// by another process, does not signal that process; it tears down from
// the state instead.
func TestCancelReusedPID(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	const run = "reused-0101-000000-aaaa"
	// The apply recorded its own start time and command line; the sleep
	// that now has its pid has others.
	recordRun(t, run, state.Run{State: state.RunRunning, PID: sleep.Process.Pid, Host: host,
		Proc: "boot=00000000-0000-0000-0000-000000000000 start=1 argv=0011223344556677"},
		"local", map[string]string{"ref": filepath.Join(dir, ".taoflow", "sandboxes", run+"-gpu")})
	code, out, errOut := applyCLI(t, "cancel", run)
	// A pending SIGINT from cancel would be delivered before this SIGTERM.
	_ = sleep.Process.Signal(syscall.SIGTERM)
	_ = sleep.Wait()
	if sig := sleep.ProcessState.Sys().(syscall.WaitStatus).Signal(); sig != syscall.SIGTERM {
		t.Errorf("cancel signalled the process that reused the apply's pid (it ended by %v)", sig)
	}
	// It went on to tear down from the state (the recorded sandbox is no
	// sandbox, so that part fails; what matters is who was signalled).
	if strings.Contains(out, "interrupted apply") || !strings.Contains(out, run+": instance gpu on gpu") {
		t.Errorf("cancel took the process for the apply, or did not tear down from the state: exit %d\n%s%s", code, out, errOut)
	}
}

// TestBrevDestroyConfirmedBinary: a brev program the plan named is run by
// destroy once the user names it again, and brev then gets the caller's
// environment without the run's secrets, as in apply.
func TestBrevDestroyConfirmedBinary(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	const name = "tf-conf-0101-000000-cccc-gpu"
	brevCreate(t, f, name)
	const secretValue = "destroy-s3cr3t-value-0123456789"
	t.Setenv("MY_SECRET", secretValue)
	envDir := filepath.Join(dir, "envs")
	if err := os.Mkdir(envDir, 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "my-brev")
	script := "#!/bin/sh\nenv > '" + envDir + "'/env.$$\nexec '" + f.Binary + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	const run = "conf-0101-000000-cccc"
	recordRun(t, run, state.Run{}, "brev", map[string]string{"ref": name, "pf.binary": wrapper, "pf.secrets": "MY_SECRET"})

	code, out, errOut := applyCLI(t, "destroy", run, "--yes")
	if code != exitUsage {
		t.Fatalf("destroy without --brev-binary: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = applyCLI(t, "destroy", run, "--yes", "--brev-binary", wrapper)
	if code != exitOK || !strings.Contains(out, "instance gpu: removed") {
		t.Fatalf("destroy --brev-binary: exit %d\n%s%s", code, out, errOut)
	}
	envs, _ := filepath.Glob(filepath.Join(envDir, "env.*"))
	if len(envs) == 0 {
		t.Fatal("the confirmed brev program never ran")
	}
	for _, p := range envs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secretValue) {
			t.Errorf("brev ran by destroy had the secret in its environment (%s)", p)
		}
	}
	f.CheckNoneAlive(t)
}

// TestForgedStateNamesAnotherInstance: a state whose brev instance is not
// the one its run would have named (one of the user's other instances) is
// refused before brev runs.
func TestForgedStateNamesAnotherInstance(t *testing.T) {
	t.Chdir(t.TempDir())
	const run = "forged-0101-000000-bbbb"
	recordRun(t, run, state.Run{}, "brev", map[string]string{"ref": "tf-precious-box"})
	code, out, errOut := applyCLI(t, "destroy", run, "--yes")
	if code != exitUsage || !strings.Contains(errOut, `names the brev instance "tf-precious-box"`) {
		t.Errorf("destroy exit %d, want %d naming the instance\n%s%s", code, exitUsage, out, errOut)
	}
}
