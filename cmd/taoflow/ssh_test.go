package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// TestSSHScripts runs the scripts in testdata/ssh against a real OpenSSH
// server on 127.0.0.1 that stands for two hosts, box-a and box-b, and a
// third, box-h, for the one script that makes its host hang: each alias's
// sessions run in a sandbox directory of its own as HOME. Every
// script gets the client config as ssh_config in its work directory, for
// plans to name in platform.ssh_config.
func TestSSHScripts(t *testing.T) {
	srv := sshtest.Start(t)
	homes := map[string]string{}
	for _, alias := range []string{"box-a", "box-b", "box-h"} {
		home, err := srv.AddSandbox(alias)
		if err != nil {
			t.Fatal(err)
		}
		homes[alias] = home
	}
	image := testrig.BuildTrainerImage(t, "")
	config, err := os.ReadFile(srv.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/ssh",
		Setup: func(env *testscript.Env) error {
			isolateState(env)
			env.Setenv("HOME_A", homes["box-a"])
			env.Setenv("HOME_B", homes["box-b"])
			env.Setenv("HOME_H", homes["box-h"])
			env.Setenv("LOCAL_IMAGE", image)
			env.Setenv("NAME", testrig.UniqueName(t)+"-"+filepath.Base(env.WorkDir))
			// A host that refuses is tried four times without seconds between.
			env.Setenv("TAOFLOW_RETRY_BACKOFF", "10ms")
			return os.WriteFile(filepath.Join(env.WorkDir, "ssh_config"), config, 0o600)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"exitcode": cmdExitCode,
			"noargv":   cmdNoArgv,
			"procs":    cmdProcs,
			"waitnode": cmdWaitNode,
		},
	})
}
