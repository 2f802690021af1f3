package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

const brevFetchFails = `taoflow: 1
name: brev-fetchfail
platform: brev
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: send
    uses: send
    with: {from: specs, to: "~/specs"}
  - id: train
    uses: run
    needs: [send]
    with: {command: "mkdir -p ~/results && cat ~/specs/spec.yaml > ~/results/model.pth"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
  - id: fetch
    uses: fetch
    needs: [wait]
    with: {from: "~/results", to: "blocker/results"}
finally:
  - id: teardown
    uses: delete
`

// TestBrevFetchFailureStops: a fetch that fails (here: its destination on
// this machine cannot be created) protects the instance that holds the
// results exactly as a failed upload-s3 does: stopped, not deleted, exit
// 3 with the command that removes it. The send before it went over the
// brev ssh transport into the (fake) instance, whose job read it.
func TestBrevFetchFailureStops(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "fetchfail.yaml", brevFetchFails)
	if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"specs/spec.yaml": "weights from the spec\n", "blocker": "a file where fetch wants a directory"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "fetchfail.yaml")
	if code != exitTeardown {
		t.Fatalf("apply exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "fetch failed: cannot create "+filepath.Join(dir, "blocker")) {
		t.Errorf("the failure does not say what went wrong:\n%s", errOut)
	}
	if !regexp.MustCompile(`instance gpu was stopped, not deleted: .*taoflow destroy brev-fetchfail-\S+ --yes`).MatchString(errOut) {
		t.Errorf("the run does not say the instance was stopped, and how to remove it:\n%s", errOut)
	}
	found := false
	for _, in := range f.Instances() {
		if !strings.HasSuffix(in.Name, "-gpu") {
			continue
		}
		found = true
		if in.Status != "STOPPING" && in.Status != "STOPPED" {
			t.Errorf("the instance holding the results is %s, want stopped", in.Status)
		}
		if b, err := os.ReadFile(filepath.Join(in.Sandbox, "results", "model.pth")); err != nil || string(b) != "weights from the spec\n" {
			t.Errorf("the results on the stopped instance (made from what send sent): %q, %v", b, err)
		}
	}
	if !found {
		t.Fatalf("no instance was created: %+v", f.Instances())
	}
	for _, c := range f.Calls() {
		if c.Command == "delete" {
			t.Errorf("the instance was deleted although its fetch failed: brev %s", strings.Join(c.Args, " "))
		}
	}
	if code, out, errOut := applyCLI(t, "destroy", "latest", "--yes"); code != exitOK || !strings.Contains(out, "instance gpu: removed") {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}

// TestTransferScripts runs the scripts of testdata/transfer against a real
// S3 server (versitygw) and the AWS CLI: $S3_ENDPOINT, and $S3_BUCKET whose
// prefix data/ holds one.txt ("shard one\n") and sub/two.txt ("two\n");
// the credentials are in the environment, where a plan's secrets: finds
// them.
func TestTransferScripts(t *testing.T) {
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	src := t.TempDir()
	for name, content := range map[string]string{"one.txt": "shard one\n", "sub/two.txt": "two\n"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s3.AWS(t, "s3", "sync", "--only-show-errors", src, "s3://"+bucket+"/data/"); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/transfer",
		Setup: func(env *testscript.Env) error {
			isolateState(env)
			env.Setenv("S3_ENDPOINT", s3.Endpoint)
			env.Setenv("S3_BUCKET", bucket)
			env.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
			env.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"waitnode": cmdWaitNode,
		},
	})
}
