package brevtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// hangGuard bounds every fake brev run: a hang fails the test instead of
// the whole binary.
const hangGuard = 30 * time.Second

type result struct {
	stdout, stderr string
	code           int
}

// brev runs the fake with args; stdin nil means /dev/null (as a client
// must pass it).
func brev(t *testing.T, f *brevtest.Fake, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.Binary, args...)
	cmd.Env = f.Env()
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("brev %q did not finish within %v\nstdout: %s\nstderr: %s", args, hangGuard, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("brev %q: %v", args, err)
	}
	return r
}

// mustBrev runs the fake and fails the test unless it exits 0.
func mustBrev(t *testing.T, f *brevtest.Fake, args ...string) result {
	t.Helper()
	r := brev(t, f, nil, args...)
	if r.code != 0 {
		t.Fatalf("brev %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// lsJSON runs `ls --json` (one tick) and returns the workspaces by name.
func lsJSON(t *testing.T, f *brevtest.Fake) map[string]map[string]string {
	t.Helper()
	r := mustBrev(t, f, "ls", "--json")
	var v struct {
		Workspaces []map[string]string `json:"workspaces"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("ls --json printed %q: %v", r.stdout, err)
	}
	out := map[string]map[string]string{}
	for _, w := range v.Workspaces {
		out[w["name"]] = w
	}
	return out
}

// lastCall returns the most recent call to the fake.
func lastCall(t *testing.T, f *brevtest.Fake) brevtest.Call {
	t.Helper()
	calls := f.Calls()
	if len(calls) == 0 {
		t.Fatal("no calls logged")
	}
	return calls[len(calls)-1]
}
