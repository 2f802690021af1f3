package main

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as the taoflow command inside scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"taoflow": func() {
			os.Exit(exitCode(run(context.Background(), os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}), os.Stderr))
		},
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Scripts refer to the repository's example plans.
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", wd+"/../../examples/plans")
			return nil
		},
	})
}
