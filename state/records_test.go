package state

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRuns(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	local := time.FixedZone("CET", 3600)
	r1 := Run{
		ID: "r1", Name: "sweep", PlanFile: "plans/sweep.yaml", PlanHash: "sha256:abc",
		Vars: map[string]string{"epochs": "10", "lr": "0.1"}, State: RunRunning,
		PID: 4242, Host: "laptop", StartedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, local),
	}
	r2 := Run{ID: "r2", Name: "other", State: RunSucceeded}
	for _, r := range []Run{r1, r2} {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateRun(ctx, r1); err == nil {
		t.Error("CreateRun of an existing id succeeded")
	}

	got, err := s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, got); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	if got.StartedAt.Location() != time.UTC {
		t.Errorf("StartedAt location = %v, want UTC", got.StartedAt.Location())
	}

	all, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Run{r2, r1}, all); diff != "" {
		t.Errorf("Runs, newest first (-want +got):\n%s", diff)
	}
	latest, err := s.LatestRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r2, latest); diff != "" {
		t.Errorf("LatestRun (-want +got):\n%s", diff)
	}

	// UpdateRun sets every field: ending the run, then resuming it.
	steps := []struct {
		name   string
		update RunUpdate
	}{
		{"end", RunUpdate{State: RunFailed, EndedAt: at(9), ExitCode: 1, Message: "train failed"}},
		{"resume", RunUpdate{State: RunRunning}},
	}
	for _, step := range steps {
		if err := s.UpdateRun(ctx, "r1", step.update); err != nil {
			t.Fatal(err)
		}
		want := r1
		want.State, want.EndedAt, want.ExitCode, want.Message = step.update.State, step.update.EndedAt, step.update.ExitCode, step.update.Message
		got, err := s.Run(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: Run (-want +got):\n%s", step.name, diff)
		}
	}

	if err := s.SetRunOwner(ctx, "r1", 777, "ci", "start=1"); err != nil {
		t.Fatal(err)
	}
	got, err = s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != 777 || got.Host != "ci" || got.Proc != "start=1" {
		t.Errorf("after SetRunOwner: PID, Host, Proc = %d, %q, %q, want 777, ci, start=1", got.PID, got.Host, got.Proc)
	}
}

func TestNodes(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	mustCreateRun(t, s, "r2")

	a := Node{RunID: "r1", ID: "train[lr=0.1]@gpu0", Step: "train", Instance: "gpu0", Cell: "lr=0.1",
		State: "running", Attempts: 1, StartedAt: at(1), Progress: "epoch 3/10 loss 0.21 eta 4m"}
	b := Node{RunID: "r1", ID: "cleanup", Step: "cleanup", Finally: true, State: "pending"}
	c := Node{RunID: "r2", ID: "train[lr=0.1]@gpu0", State: "succeeded", ExitCode: ptr(0)}
	for _, n := range []Node{a, b, c} {
		if err := s.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// Upsert a: it keeps its place and Seq.
	a.State, a.Attempts, a.EndedAt, a.ExitCode, a.Message, a.Progress = "failed", 2, at(5), ptr(137), "killed", ""
	a.Seq = 999 // ignored
	if err := s.PutNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Seq, b.Seq, c.Seq = 1, 2, 3

	got, err := s.Nodes(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Node{a, b}, got); diff != "" {
		t.Errorf("Nodes(r1) (-want +got):\n%s", diff)
	}
	one, err := s.Node(ctx, "r2", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, one); diff != "" {
		t.Errorf("Node(r2) (-want +got):\n%s", diff)
	}
	if one.ExitCode == nil {
		t.Error("exit code 0 read back as no exit code")
	}
	none, err := s.Nodes(ctx, "r3")
	if err != nil || len(none) != 0 {
		t.Errorf("Nodes of a run without nodes = %v, %v; want none, nil", none, err)
	}
}

func TestResources(t *testing.T) {
	ctx := t.Context()
	type op func(t *testing.T, s *Store) // acts on the resource recorded first
	intent := Resource{RunID: "r1", Kind: KindInstance, Name: "taoflow-r1-gpu0", Instance: "gpu0", Platform: "brev",
		Data: map[string]string{"type": "h100"}}
	record := func(r Resource) op {
		return func(t *testing.T, s *Store) {
			t.Helper()
			id, err := s.RecordIntent(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if id != 1 {
				t.Errorf("RecordIntent id = %d, want 1 (the existing row)", id)
			}
		}
	}
	created := func(t *testing.T, s *Store) {
		if err := s.MarkCreated(ctx, 1, map[string]string{"id": "i-123"}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := func(t *testing.T, s *Store) {
		if err := s.MarkDeleted(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	failed := func(t *testing.T, s *Store) {
		if err := s.MarkFailed(ctx, 1, "brev: timeout"); err != nil {
			t.Fatal(err)
		}
	}
	other := intent
	other.Instance, other.Platform, other.Data = "gpu1", "ssh", map[string]string{"host": "h"}

	tests := map[string]struct {
		ops   []op
		want  Resource
		alive bool
	}{
		"intent": {
			want:  Resource{State: ResourceIntent, Data: map[string]string{"type": "h100"}, UpdatedAt: at(1)},
			alive: true,
		},
		"created merges data": {
			ops:   []op{created},
			want:  Resource{State: ResourceCreated, Data: map[string]string{"type": "h100", "id": "i-123"}, UpdatedAt: at(4)},
			alive: true,
		},
		"deleted": {
			ops:  []op{created, deleted},
			want: Resource{State: ResourceDeleted, Data: map[string]string{"type": "h100", "id": "i-123"}, UpdatedAt: at(5)},
		},
		"delete failed": {
			ops: []op{created, failed},
			want: Resource{State: ResourceDeleteFailed, Data: map[string]string{"type": "h100", "id": "i-123"},
				UpdatedAt: at(5), Message: "brev: timeout"},
			alive: true,
		},
		"delete retried": {
			ops:  []op{created, failed, deleted},
			want: Resource{State: ResourceDeleted, Data: map[string]string{"type": "h100", "id": "i-123"}, UpdatedAt: at(6)},
		},
		"intent again dedups": {
			ops:   []op{record(other)},
			want:  Resource{State: ResourceIntent, Data: map[string]string{"type": "h100"}, UpdatedAt: at(1)},
			alive: true,
		},
		"intent again keeps created": {
			ops:   []op{created, record(other)},
			want:  Resource{State: ResourceCreated, Data: map[string]string{"type": "h100", "id": "i-123"}, UpdatedAt: at(4)},
			alive: true,
		},
		"intent after delete starts over": {
			ops: []op{created, deleted, record(other)},
			want: Resource{State: ResourceIntent, Instance: "gpu1", Platform: "ssh", Data: map[string]string{"host": "h"},
				CreatedAt: at(6), UpdatedAt: at(6)},
			alive: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := openTest(t)
			mustCreateRun(t, s, "r1")
			mustCreateRun(t, s, "r2")
			id, err := s.RecordIntent(ctx, intent)
			if err != nil {
				t.Fatal(err)
			}
			// A resource of another run, and one of another kind with the
			// same name: neither is a duplicate. They take clock readings 2
			// and 3, so the ops start at 4.
			id2, err := s.RecordIntent(ctx, Resource{RunID: "r2", Kind: KindInstance, Name: intent.Name})
			if err != nil {
				t.Fatal(err)
			}
			id3, err := s.RecordIntent(ctx, Resource{RunID: "r1", Kind: KindJob, Name: intent.Name})
			if err != nil {
				t.Fatal(err)
			}
			if id != 1 || id2 != 2 || id3 != 3 {
				t.Fatalf("ids = %d, %d, %d; want 1, 2, 3", id, id2, id3)
			}
			for _, o := range tc.ops {
				o(t, s)
			}

			want := Resource{ID: 1, RunID: "r1", Kind: KindInstance, Name: intent.Name, Instance: "gpu0",
				Platform: "brev", CreatedAt: at(1)}
			want.State, want.Data, want.UpdatedAt, want.Message = tc.want.State, tc.want.Data, tc.want.UpdatedAt, tc.want.Message
			if tc.want.Instance != "" {
				want.Instance, want.Platform, want.CreatedAt = tc.want.Instance, tc.want.Platform, tc.want.CreatedAt
			}
			got, err := s.Resource(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resource (-want +got):\n%s", diff)
			}

			all, err := s.Resources(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].ID != 1 || all[1].ID != 3 {
				t.Errorf("Resources(r1) ids = %v, want [1 3]", ids(all))
			}
			wantAlive, wantAll := []int64{3}, []int64{2, 3}
			if tc.alive {
				wantAlive, wantAll = []int64{1, 3}, []int64{1, 2, 3}
			}
			alive, err := s.Alive(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantAlive, ids(alive)); diff != "" {
				t.Errorf("Alive(r1) ids (-want +got):\n%s", diff)
			}
			aliveAll, err := s.AliveAll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantAll, ids(aliveAll)); diff != "" {
				t.Errorf("AliveAll ids (-want +got):\n%s", diff)
			}
		})
	}
}

func ids(rs []Resource) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestEvents(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	mustCreateRun(t, s, "r2")
	in := []Event{
		{RunID: "r1", Time: at(100), Type: "node-started", Node: "a", Data: map[string]string{"attempt": "1"}},
		{RunID: "r2", Type: "run-started"}, // zero time: the clock's first reading
		{RunID: "r1", Time: at(101), Type: "node-finished", Node: "a", Message: "ok"},
		{RunID: "r1", Time: at(102), Type: "run-finished"},
	}
	for i, e := range in {
		seq, err := s.AppendEvent(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) {
			t.Errorf("event %d: seq = %d, want %d", i, seq, i+1)
		}
		in[i].Seq = seq
	}
	in[1].Time = at(1)

	tests := map[string]struct {
		run   string
		after int64
		limit int
		want  []Event
	}{
		"all of r1":       {run: "r1", want: []Event{in[0], in[2], in[3]}},
		"after seq":       {run: "r1", after: 1, want: []Event{in[2], in[3]}},
		"limit":           {run: "r1", limit: 2, want: []Event{in[0], in[2]}},
		"after and limit": {run: "r1", after: 2, limit: 1, want: []Event{in[2]}},
		"other run":       {run: "r2", want: []Event{in[1]}},
		"caught up":       {run: "r1", after: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Events(ctx, tc.run, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeFacts(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	n := Node{RunID: "r1", ID: "pull@gpu0", Step: "pull", Instance: "gpu0", State: "running"}
	if err := s.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"image", "reg/img:1"}, {"digest", "sha256:aaa"}, {"digest", "sha256:bbb"}} {
		if err := s.SetNodeFact(ctx, "r1", n.ID, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	// A later PutNode (the node ends) keeps the facts.
	n.State = "succeeded"
	if err := s.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	got, err := s.Node(ctx, "r1", n.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"image": "reg/img:1", "digest": "sha256:bbb"}
	if diff := cmp.Diff(want, got.Facts); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	if err := s.SetNodeFact(ctx, "r1", "nope", "digest", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("fact of an unknown node: %v, want ErrNotFound", err)
	}
	if err := s.SetNodeFact(ctx, "r1", n.ID, `a"]; drop`, "x"); err == nil {
		t.Error("a fact key with JSON path syntax was accepted")
	}
}
