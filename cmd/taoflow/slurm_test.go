package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
)

// TestSlurmScripts runs the scripts in testdata/slurm against a real
// single-node Slurm cluster (testrig.StartSlurm: slurmctld, slurmd and a
// munged of its own; partitions debug and short; 2 GRES GPUs), which
// they share. Each script has its own HOME (the default workdir is under
// it) and SLURM_CONF naming the cluster; the plans' names differ, so a
// script looks for its own jobs in squeue.
func TestSlurmScripts(t *testing.T) {
	cluster := testrig.StartSlurm(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/slurm",
		Setup: func(env *testscript.Env) error {
			isolateState(env)
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("SLURM_CONF", cluster.Conf)
			env.Setenv("SLURM_DIR", cluster.Dir)
			env.Setenv("TAOFLOW_RETRY_BACKOFF", "10ms")
			return os.Mkdir(home, 0o700)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"exitcode": cmdExitCode,
			"waitnode": cmdWaitNode,
		},
	})
}
