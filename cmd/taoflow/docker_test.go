package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/state"
)

// TestDockerScripts runs the scripts in testdata/docker against real
// components: the Docker engine, a registry with htpasswd auth holding the
// fake TAO trainer image, and an S3 gateway with the AWS CLI. The scripts
// apply the example plan examples/plans/changenet-local-docker.yaml as a
// user would, with --var pointing it at them.
func TestDockerScripts(t *testing.T) {
	reg := testrig.StartRegistryUser(t, "$oauthtoken")
	local := testrig.BuildTrainerImage(t, "")
	image := reg.Push(t, local)
	// Drop the local copy so that the first pull is a real one (from the
	// registry, with the login the plan did).
	if _, err := testrig.Docker(t, "rmi", image); err != nil {
		t.Fatal(err)
	}
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)

	params := testscript.Params{
		Dir: "testdata/docker",
		Setup: func(env *testscript.Env) error {
			isolateState(env)
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", wd+"/../../examples/plans")
			env.Setenv("IMAGE", image)
			env.Setenv("LOCAL_IMAGE", local)
			env.Setenv("REGISTRY", reg.Addr)
			env.Setenv("NGC_KEY", reg.Password)
			env.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
			env.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
			env.Setenv("S3_ENDPOINT", s3.Endpoint)
			env.Setenv("S3_DIR", s3.Dir) // the gateway's files: a test corrupts an object there
			env.Setenv("BUCKET", bucket)
			// Each script writes under a prefix of its own.
			env.Setenv("PREFIX", testrig.UniqueName(t)+"-"+filepath.Base(env.WorkDir))
			host, _ := os.Hostname()
			env.Setenv("OWNER", fmt.Sprintf("%s:%d", host, os.Getpid()))
			// Above Linux's largest pid_max: never a live process.
			env.Setenv("DEAD_OWNER", host+":4194305")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"exitcode": cmdExitCode,
			"noargv":   cmdNoArgv,
			"waitlog":  cmdWaitLog,
			"waitfact": cmdWaitFact,
			"sleep":    cmdSleep,
			"s3ls": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: s3ls prefix")
				}
				objects := s3.List(t, bucket, args[0])
				keys := make([]string, 0, len(objects))
				for k := range objects {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(ts.Stdout(), "%s %d\n", k, objects[k])
				}
			},
			"s3cat": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 || neg {
					ts.Fatalf("usage: s3cat prefix name")
				}
				for k := range s3.List(t, bucket, args[0]) {
					if filepath.Base(k) == args[1] {
						out, err := s3.AWS(t, "s3", "cp", "s3://"+bucket+"/"+k, "-")
						ts.Check(err)
						fmt.Fprint(ts.Stdout(), out)
						return
					}
				}
				ts.Fatalf("no object named %s under %s", args[1], args[0])
			},
			"leftovers": func(ts *testscript.TestScript, neg bool, args []string) { cmdLeftovers(t, ts, neg, args) },
			"waitcontainer": func(ts *testscript.TestScript, neg bool, args []string) {
				cmdWaitContainer(t, ts, neg, args)
			},
		},
	}
	// t.Run returns once the scripts, run in parallel, have all ended.
	t.Run("apply", func(t *testing.T) { testscript.Run(t, params) })
	// reap removes every orphan of the machine's engine, including the
	// container of a killed apply that a script above resumes: it runs
	// after them.
	params.Dir = "testdata/docker-reap"
	t.Run("reap", func(t *testing.T) { testscript.Run(t, params) })
}

// waitcontainer NAME-SUBSTRING: wait (up to 60s) until a running container's
// name contains the text, and print its name.
func cmdWaitContainer(t testing.TB, ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitcontainer name-substring")
	}
	var out string
	testrig.Eventually(ts, 60*time.Second, "a running container named *"+args[0]+"*", func() bool {
		var err error
		out, err = testrig.Docker(t, "ps", "--filter", "name="+args[0], "--filter", "status=running", "--format", "{{.Names}}")
		ts.Check(err)
		return out != ""
	})
	fmt.Fprintln(ts.Stdout(), out)
}

// leftovers: fail if a container of any run in the script's state still
// exists (whatever its state).
func cmdLeftovers(t testing.TB, ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: leftovers")
	}
	st, err := state.OpenReadOnly(ts.MkAbs(".taoflow"))
	ts.Check(err)
	defer st.Close()
	runs, err := st.Runs(context.Background())
	ts.Check(err)
	if len(runs) == 0 {
		ts.Fatalf("no runs in the state")
	}
	for _, r := range runs {
		out, err := testrig.Docker(t, "ps", "-a", "--filter", "label=taoflow.run="+r.ID, "--format", "{{.Names}} {{.State}}")
		ts.Check(err)
		if strings.TrimSpace(out) != "" {
			ts.Fatalf("containers of run %s left behind:\n%s", r.ID, out)
		}
	}
}
