package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
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

// TestDetachedArgs: the background process of apply --detach gets the
// flags the user gave, each value whole (repeatable ones each), less those
// the foreground settled, and the settled values; the plan path comes
// after "--", so a plan named like a flag stays a plan.
func TestDetachedArgs(t *testing.T) {
	for name, tc := range map[string]struct {
		args      []string
		brevGiven bool
		p         *plan.Plan
		want      []string
	}{
		"flags": {
			args: []string{"-d", "--yes", "--var", "a=1 2", "--var", "b=x=y", "--tag", "k=v", "--parallel", "3", "--json",
				"--state", "rel", "--name", "n", "--strict", "--finally-timeout", "5m", "--detach-on-hangup"},
			p: &plan.Plan{},
			want: []string{"apply", "--finally-timeout=5m0s", "--name=n", "--parallel=3", "--strict=true", "--tag=k=v",
				"--var=a=1 2", "--var=b=x=y", "--yes", "--output=plain", "--state=/abs/state", "--detached-run=r-1", "--", "-plan.yaml"},
		},
		"brev binary given": {
			args:      []string{"--detach", "--brev-binary", "./mybrev"},
			brevGiven: true,
			p:         &plan.Plan{Platform: plan.Platform{Kind: plan.PlatformBrev, Binary: "/abs/mybrev"}},
			want:      []string{"apply", "--yes", "--output=plain", "--state=/abs/state", "--detached-run=r-1", "--brev-binary=/abs/mybrev", "--", "-plan.yaml"},
		},
		"plan's binary agreed to": {
			args: []string{"-d"},
			p:    &plan.Plan{File: "/p/plan.yaml", Platform: plan.Platform{Kind: plan.PlatformBrev, Binary: "/p/tools/brev"}},
			want: []string{"apply", "--yes", "--output=plain", "--state=/abs/state", "--detached-run=r-1", "--brev-binary=/p/tools/brev", "--", "-plan.yaml"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
			apply, _, err := root.Find([]string{"apply"})
			if err != nil {
				t.Fatal(err)
			}
			if err := apply.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			got := detachedArgs(apply.Flags(), tc.brevGiven, "-plan.yaml", "/abs/state", tc.p, nil, "r-1")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("detachedArgs (-want +got):\n%s", diff)
			}
		})
	}
}
