package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/state"
)

// waitrun STATE: wait (up to 2m) until the latest run in .taoflow is in
// STATE (succeeded, failed, interrupted...): a detached run ending with
// nobody attached.
func cmdWaitRun(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: waitrun state")
	}
	last := ""
	testrig.Eventually(ts, 2*time.Minute, fmt.Sprintf("the latest run to be %s", args[0]), func() bool {
		st, err := state.OpenReadOnly(ts.MkAbs(".taoflow"))
		if err != nil {
			return false
		}
		defer st.Close()
		r, err := st.LatestRun(context.Background())
		if err != nil {
			return false
		}
		last = r.State
		return r.State == args[0]
	})
	ts.Logf("latest run: %s", last)
}
