package state

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taoflow/taoflow/internal/progress"
)

const secret = "s3cr3t"

// writeEverything puts secret into every string field of every kind of
// record, and into a log, through s. Ids carry it too.
func writeEverything(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	x := func(field string) string { return field + "-" + secret + "-<&>\"" }
	run := x("run")
	err := s.CreateRun(ctx, Run{ID: run, Name: x("name"), PlanFile: x("file"), PlanHash: x("hash"),
		Vars: map[string]string{x("k"): x("v")}, State: x("state"), Host: x("host"), Message: x("msg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, run, RunUpdate{State: x("state2"), Message: x("msg2")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunOwner(ctx, run, 1, x("host2"), x("proc2")); err != nil {
		t.Fatal(err)
	}
	err = s.PutNode(ctx, Node{RunID: run, ID: x("node"), Step: x("step"), Instance: x("inst"), Cell: x("cell"),
		State: x("state"), Message: x("msg"), Progress: x("progress"),
		ProgressFigures: &progress.Figures{Job: x("job"), Metric: x("metric"), ETA: x("eta"), Message: x("pmsg")}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.RecordIntent(ctx, Resource{RunID: run, Kind: x("kind"), Name: x("name"), Instance: x("inst"),
		Platform: x("platform"), Data: map[string]string{x("k"): x("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkCreated(ctx, id, map[string]string{x("k2"): x("v2")}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, id, x("msg")); err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendEvent(ctx, Event{RunID: run, Type: x("type"), Node: x("node"), Message: x("msg"),
		Data: map[string]string{x("k"): x("v")}})
	if err != nil {
		t.Fatal(err)
	}
	// The provenance hides the secret behind a JSON escape (\u0033 is
	// '3'): it is redacted once decoded, before it is encoded again.
	prov := `{"git": {"remote": "https://u:s3cr\u0033t@h/r.git", "changed": ["a-s3cr3t"]}, "s3cr3t-key": 1}`
	err = s.SetRunRecord(ctx, RunRecord{RunID: run, Label: x("label"), Tags: map[string]string{x("tk"): x("tv")}, Provenance: []byte(prov)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(run, x("node"), []byte("token="+secret[:3])); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(run, x("node"), []byte(secret[3:]+" in a log line\n"+x("tail"))); err != nil {
		t.Fatal(err)
	}
}

// TestRedaction writes a secret into every field and checks the bytes on
// disk: with a redactor the secret is nowhere under the state directory;
// without one (the control) it is, which proves the check can see it.
func TestRedaction(t *testing.T) {
	redact := func(v string) string { return strings.ReplaceAll(v, secret, "***") }
	tests := map[string]struct {
		opts       []Option
		wantSecret bool
	}{
		"redacted":         {opts: []Option{WithRedactor(redact)}},
		"control identity": {wantSecret: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			writeEverything(t, s)
			// Read the -wal file while it still holds the writes.
			files := map[string][]byte{}
			readAll := func(when string) {
				err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					b, err := os.ReadFile(p)
					files[when+" "+strings.TrimPrefix(p, dir)] = b
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			readAll("open")
			if _, ok := files["open /state.db-wal"]; !ok {
				t.Fatal("no -wal file while open")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			readAll("closed")

			var with []string
			for name, b := range files {
				if bytes.Contains(b, []byte(secret)) {
					with = append(with, name)
				}
			}
			if tc.wantSecret && len(with) == 0 {
				t.Errorf("control: no file holds the secret; the check proves nothing")
			}
			if !tc.wantSecret && len(with) > 0 {
				t.Errorf("the secret is on disk in %v", with)
			}
		})
	}
}

// TestRedactionReadBack checks that what is read back is the redacted text,
// and that lookups by an id holding a secret still find the record.
func TestRedactionReadBack(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, WithRedactor(func(v string) string { return strings.ReplaceAll(v, secret, "***") }))
	writeEverything(t, s)
	x := func(field string) string { return field + "-***-<&>\"" }
	run := "run-" + secret + "-<&>\""

	r, err := s.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	wantRun := Run{ID: x("run"), Name: x("name"), PlanFile: x("file"), PlanHash: x("hash"),
		Vars: map[string]string{x("k"): x("v")}, State: x("state2"), PID: 1, Host: x("host2"), Proc: x("proc2"), Message: x("msg2")}
	if diff := cmp.Diff(wantRun, r); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	n, err := s.Node(ctx, run, "node-"+secret+"-<&>\"")
	if err != nil {
		t.Fatal(err)
	}
	wantNode := Node{RunID: x("run"), ID: x("node"), Step: x("step"), Instance: x("inst"), Cell: x("cell"),
		State: x("state"), Message: x("msg"), Progress: x("progress"), Seq: 1,
		ProgressFigures: &progress.Figures{Job: x("job"), Metric: x("metric"), ETA: x("eta"), Message: x("pmsg")}}
	if diff := cmp.Diff(wantNode, n); diff != "" {
		t.Errorf("Node (-want +got):\n%s", diff)
	}
	rs, err := s.Resources(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []Resource{{ID: 1, RunID: x("run"), Kind: x("kind"), Name: x("name"), Instance: x("inst"),
		Platform: x("platform"), State: ResourceDeleteFailed, Data: map[string]string{x("k"): x("v"), x("k2"): x("v2")},
		CreatedAt: at(1), UpdatedAt: at(3), Message: x("msg")}}
	if diff := cmp.Diff(wantRes, rs); diff != "" {
		t.Errorf("Resources (-want +got):\n%s", diff)
	}
	evs, err := s.Events(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantEv := []Event{{Seq: 1, RunID: x("run"), Time: at(4), Type: x("type"), Node: x("node"), Message: x("msg"),
		Data: map[string]string{x("k"): x("v")}}}
	if diff := cmp.Diff(wantEv, evs); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	logs, err := s.LogNodes(run)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{x("node")}, logs); diff != "" {
		t.Errorf("LogNodes (-want +got):\n%s", diff)
	}
	if err := s.FlushLog(run, "node-"+secret+"-<&>\""); err != nil {
		t.Fatal(err)
	}
	if got, want := readLog(t, s, run, "node-"+secret+"-<&>\""), "token=*** in a log line\n"+x("tail"); got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
}
