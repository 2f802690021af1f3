package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/taoflow/taoflow/engine"
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

// TestAttachFeedLiveView: what the state records of a run in progress —
// its events (with their instance) and its nodes' logs — fed back by
// attach into apply's live table shows each node's state, instance and
// last line, as apply's own view would; what is logged later arrives at
// the next read.
func TestAttachFeedLiveView(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".taoflow")
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const run = "r-1"
	if err := st.CreateRun(ctx, state.Run{ID: run, Name: "r", State: state.RunRunning, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []state.Node{
		{RunID: run, ID: "train@gpu0", Step: "train", Instance: "gpu0", State: "running"},
		{RunID: run, ID: "prep@gpu1", Step: "prep", Instance: "gpu1", State: "pending"},
	} {
		if err := st.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []state.Event{
		{RunID: run, Type: string(engine.InstanceReady), Data: map[string]string{"instance": "gpu0"}},
		{RunID: run, Type: string(engine.NodeStarted), Node: "train@gpu0", Data: map[string]string{"attempt": "1"}},
		{RunID: run, Type: string(engine.NodeStarted), Node: "prep@gpu1", Data: map[string]string{"attempt": "1", "instance": "gpu1"}},
		{RunID: run, Type: string(engine.NodeEnded), Node: "prep@gpu1", Data: map[string]string{"state": "succeeded", "exit_code": "0"}},
	} {
		if _, err := st.AppendEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendLog(run, "train@gpu0", []byte("epoch 1\nepoch 2 loss 0.5\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLog(run, "train@gpu0"); err != nil {
		t.Fatal(err)
	}

	var out syncBuffer
	graph := &engine.Graph{Nodes: []*engine.Node{{ID: "train@gpu0", Instance: "gpu0"}, {ID: "prep@gpu1", Instance: "gpu1"}}}
	lv := newLiveView(&out, graph, func() (int, int) { return 120, 40 })
	view := &humanView{Observer: lv, out: &out, errOut: io.Discard}
	f := &attachFeed{store: st, run: run, view: view, instance: map[string]string{"train@gpu0": "gpu0", "prep@gpu1": "gpu1"},
		active: map[string]bool{"train@gpu0": true}, offsets: map[string]int64{}, partial: map[string]string{},
		ids: []string{"train@gpu0", "prep@gpu1"}}
	f.lp.sink = f.logLine
	if err := f.events(ctx); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	if err := st.AppendLog(run, "train@gpu0", []byte("epoch 3 loss 0.25\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLog(run, "train@gpu0"); err != nil {
		t.Fatal(err)
	}
	f.logs()
	view.Close()
	// The last table drawn.
	all := out.String()
	table := all[strings.LastIndex(all, "NODE "):]
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^train@gpu0 +gpu0 +running +\S+ +epoch 3 loss 0\.25$`),
		regexp.MustCompile(`(?m)^prep@gpu1 +gpu1 +succeeded `),
		regexp.MustCompile(`1 running, 1 succeeded`),
		regexp.MustCompile(`instances — gpu0: ready`),
	} {
		if !want.MatchString(table) {
			t.Errorf("the live table lacks %s:\n%s", want, table)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the live view's redraw goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDetachedStartJSON: what apply --detach --json prints is what
// docs/json.md's DetachedStart says, every field (the script
// apply-detach.txtar checks the printed values).
func TestDetachedStartJSON(t *testing.T) {
	schemas := loadSchemas(t, "../../docs/json.md")
	var b bytes.Buffer
	if err := writeJSON(&b, detachedStart{Run: "r-1", PID: 42, Log: "/s/.taoflow/runs/r-1/apply.log"}); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	decode(t, b.Bytes(), &v)
	if len(v) != 3 {
		t.Errorf("DetachedStart has %d fields, want run, pid, log: %v", len(v), v)
	}
	schemas.check(t, "DetachedStart", v)
}

// TestHangupViewGoesPlain: under --detach-on-hangup, the live table stops
// at the hangup (no more redraws into the log) and the events after it are
// printed as timestamped lines.
func TestHangupViewGoesPlain(t *testing.T) {
	var term, log syncBuffer
	graph := &engine.Graph{Nodes: []*engine.Node{{ID: "train@a", Instance: "a"}}}
	hv := &humanView{Observer: newLiveView(&term, graph, func() (int, int) { return 100, 30 }), out: &log, errOut: io.Discard}
	h := &hangup{mode: hangupContinue}
	toPlain := h.withHangup(hv, &log)
	if toPlain == nil {
		t.Fatal("no hangup view for a live view under --detach-on-hangup")
	}
	now := time.Now()
	hv.Event(engine.Event{Time: now, Type: engine.NodeStarted, Node: "train@a", Instance: "a", Attempt: 1})
	toPlain()
	drawn := term.String()
	hv.Event(engine.Event{Time: now, Type: engine.NodeEnded, Node: "train@a", Instance: "a", State: engine.Succeeded})
	time.Sleep(500 * time.Millisecond) // redraws, were the table still live, come every 200ms
	hv.Close()
	if !strings.Contains(drawn, "train@a") || term.String() != drawn {
		t.Errorf("the live table drew %q, then %q after the hangup", drawn, strings.TrimPrefix(term.String(), drawn))
	}
	if want := now.Format("15:04:05") + " train@a on a: succeeded\n"; log.String() != want {
		t.Errorf("after the hangup the log got %q, want %q", log.String(), want)
	}

	if (&hangup{mode: hangupTeardown}).withHangup(&humanView{Observer: &plainView{w: &log}}, &log) != nil {
		t.Error("a hangup view without --detach-on-hangup")
	}
}
