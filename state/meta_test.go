package state

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunRecords(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	mustCreateRun(t, s, "r1")
	mustCreateRun(t, s, "r2")
	mustCreateRun(t, s, "r3")

	if rec, err := s.RunRecord(ctx, "r1"); err != nil || rec.Label != "" || rec.Tags != nil || rec.Provenance != nil {
		t.Fatalf("a run without a record: %+v, %v", rec, err)
	}
	want := RunRecord{RunID: "r1", Label: "first", Tags: map[string]string{"team": "cv"}, Provenance: []byte(`{"git":{"commit":"abc"}}`)}
	if err := s.SetRunRecord(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunRecord(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r, err := s.RunByName(ctx, "first"); err != nil || r.ID != "r1" {
		t.Errorf("RunByName(first) = %v, %v", r.ID, err)
	}
	if _, err := s.RunByName(ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RunByName(none): %v, want ErrNotFound", err)
	}
	// Names are unique; runs without one are many.
	err = s.SetRunRecord(ctx, RunRecord{RunID: "r2", Label: "first"})
	if !errors.Is(err, ErrNameTaken) {
		t.Errorf("a second run named first: %v, want ErrNameTaken", err)
	}
	for _, id := range []string{"r2", "r3"} {
		if err := s.SetRunRecord(ctx, RunRecord{RunID: id, Tags: map[string]string{"team": id}}); err != nil {
			t.Errorf("run %s without a name: %v", id, err)
		}
	}
	all, err := s.RunRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["r3"].Tags["team"] != "r3" || all["r1"].Label != "first" {
		t.Errorf("RunRecords = %+v", all)
	}
	if err := s.SetRunRecord(ctx, RunRecord{RunID: "r1", Provenance: []byte("{not json")}); err == nil {
		t.Error("a provenance that is not JSON was stored")
	}
}
