package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// TestSlurmScripts runs the scripts in testdata/slurm against a real
// single-node Slurm cluster (testrig.StartSlurm: slurmctld, slurmd and a
// munged of its own; partitions debug and short; 2 GRES GPUs), which
// they share. Each script has its own HOME (the default workdir is under
// it) and SLURM_CONF naming the cluster; the plans' names differ, so a
// script looks for its own jobs in squeue. A real sshd stands for the
// login node of the plans with platform.host (ssh config ssh_config, host
// login, HOME $LOGIN_HOME there).
//
// A script that runs `taoflow reap` runs alone: reap --yes cancels every
// tf-* job of this user that no state it knows records, and each script
// has a state (and a user index) of its own, so the jobs of the scripts
// running beside it would be leftovers to it (a CI run once saw host.txtar's
// two pending jobs cancelled "outside taoflow" by reap.txtar).
func TestSlurmScripts(t *testing.T) {
	var alone sync.RWMutex
	cluster := testrig.StartSlurm(t)
	// A login node: a sandbox of a real sshd whose profile names the
	// cluster, for the plans with platform.host.
	srv := sshtest.Start(t)
	login, err := srv.AddSandbox("login")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(login, ".sandbox-env"), []byte("SLURM_CONF="+cluster.Conf+"; export SLURM_CONF\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(srv.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/slurm",
		Setup: func(env *testscript.Env) error {
			name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")
			text, err := os.ReadFile(filepath.Join("testdata", "slurm", name+".txtar"))
			if err != nil {
				return err
			}
			if bytes.Contains(text, []byte("taoflow reap")) {
				alone.Lock()
				env.Defer(alone.Unlock)
			} else {
				alone.RLock()
				env.Defer(alone.RUnlock)
			}
			isolateState(env)
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("SLURM_CONF", cluster.Conf)
			env.Setenv("SLURM_DIR", cluster.Dir)
			env.Setenv("TAOFLOW_RETRY_BACKOFF", "10ms")
			env.Setenv("LOGIN_HOME", login)
			if err := os.WriteFile(filepath.Join(env.WorkDir, "ssh_config"), config, 0o600); err != nil {
				return err
			}
			return os.Mkdir(home, 0o700)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"exitcode": cmdExitCode,
			"waitnode": cmdWaitNode,
		},
	})
}
