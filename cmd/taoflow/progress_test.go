package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/state"
)

// TestStatusOldProgress: a state written before progress had figures of its
// own (schema version 4: the progress line only) still shows each node's
// figures in status --json, with the values it showed then, once a taoflow
// that writes state has upgraded it.
func TestStatusOldProgress(t *testing.T) {
	schemas := loadSchemas(t, "../../docs/json.md")
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	const runID = "old-1206-010203-abcd"
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, state.Run{ID: runID, Name: "old", PlanFile: "old.yaml", State: state.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []state.Node{
		{RunID: runID, ID: "wait[n=1]", Step: "wait", Cell: "n-1", State: "succeeded", Progress: "[tf-old-train-n-1] epoch 3/10 loss 0.2135 eta 0:04:00"},
		{RunID: runID, ID: "wait[n=2]", Step: "wait", Cell: "n-2", State: "succeeded", Progress: "Starting Training Loop."},
		{RunID: runID, ID: "prep@a", Step: "prep", State: "succeeded"},
	} {
		if err := st.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Schema version 4: nodes without the figures column.
	raw, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("ALTER TABLE nodes DROP COLUMN progress_figures; PRAGMA user_version = 4"); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	status := func(wantErr string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"--state", dir, "status", runID, "--json"}, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error()+errOut.String(), wantErr) {
				t.Fatalf("status of a version 4 state: error %v, stderr %q, want %q", err, errOut.String(), wantErr)
			}
			return nil
		}
		if err != nil {
			t.Fatalf("status: %v\nstderr:\n%s", err, errOut.String())
		}
		return out.Bytes()
	}
	status("run a taoflow command that writes state to upgrade it")

	// What a taoflow that writes state (apply, destroy) does first.
	st, err = state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	decode(t, status(""), &r)
	schemas.check(t, "Run", r)
	want := map[string]string{
		"wait[n=1]": `{"job":"tf-old-train-n-1","epoch":3,"max_epoch":10,"metric":"loss","value":0.2135,"loss":0.2135,"eta":"0:04:00"}`,
		"wait[n=2]": `{"message":"Starting Training Loop."}`,
		"prep@a":    `null`,
	}
	nodes, _ := r["nodes"].([]any)
	if len(nodes) != len(want) {
		t.Fatalf("%d nodes, want %d", len(nodes), len(want))
	}
	for _, n := range nodes {
		n := n.(map[string]any)
		got, _ := json.Marshal(n["progress_figures"])
		var w any
		if err := json.Unmarshal([]byte(want[n["id"].(string)]), &w); err != nil {
			t.Fatal(err)
		}
		if w, _ := json.Marshal(w); string(got) != string(w) {
			t.Errorf("node %s: progress_figures %s, want %s", n["id"], got, w)
		}
	}
}
