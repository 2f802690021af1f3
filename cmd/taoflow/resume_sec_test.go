package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/state"
)

// TestResumeForeignRun (issue 22 item 3): apply --resume reuses a run's
// recorded vars, so a run that the state says another user or host
// started (or that says nobody) is not picked as "the latest": it must be
// named, and the recorded vars are printed before anything runs. A run of
// one's own is still resumed without its id.
func TestResumeForeignRun(t *testing.T) {
	t.Chdir(t.TempDir())
	body := "taoflow: 1\nname: p\nvars: {dest: here}\ninstances: {box: {}}\nsteps:\n  - {id: r, uses: run, with: {command: \"echo ${{ vars.dest }}\"}}\n  - {id: w, uses: wait, needs: [r], with: {timeout: 1m}}\n"
	if err := os.WriteFile("p.yaml", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	forge := func(id string, prov *provenance.Info) {
		t.Helper()
		store, err := state.Open(".taoflow")
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		ctx := context.Background()
		if err := store.CreateRun(ctx, state.Run{ID: id, Name: "p", PlanFile: "p.yaml", PlanHash: hex.EncodeToString(sum[:]),
			Vars: map[string]string{"dest": "s3://attacker-bucket"}, State: state.RunFailed, Host: "elsewhere", StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if prov != nil {
			b, _ := json.Marshal(prov)
			if err := store.SetRunRecord(ctx, state.RunRecord{RunID: id, Provenance: b}); err != nil {
				t.Fatal(err)
			}
		}
	}
	forge("p-0101-000000-aaaa", nil)
	code, out, errOut := applyCLI(t, "apply", "--output", "plain", "p.yaml", "--resume")
	if code != exitUsage || !strings.Contains(errOut, "not resuming run p-0101-000000-aaaa without its id: the state does not say who started it") || !strings.Contains(errOut, "--resume p-0101-000000-aaaa") {
		t.Errorf("a run nobody is said to have started: exit %d\n%s%s", code, out, errOut)
	}
	forge("p-0101-000000-bbbb", &provenance.Info{User: "mallory", Host: "elsewhere"})
	code, out, errOut = applyCLI(t, "apply", "--output", "plain", "p.yaml", "--resume")
	if code != exitUsage || !strings.Contains(errOut, "it was started by mallory on elsewhere, not by you") {
		t.Errorf("another user's run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = applyCLI(t, "apply", "--output", "plain", "p.yaml", "--resume=p-0101-000000-bbbb")
	if code != exitOK || !strings.Contains(errOut, "taoflow: run p-0101-000000-bbbb, started by mallory on elsewhere: its recorded vars: dest=s3://attacker-bucket") {
		t.Errorf("named: exit %d\n%s%s", code, out, errOut)
	}

	// One's own run: resumed as the latest, its vars shown.
	u, h := provenance.Who()
	forge("p-0101-000000-cccc", &provenance.Info{User: u, Host: h})
	code, out, errOut = applyCLI(t, "apply", "--output", "plain", "p.yaml", "--resume")
	if code != exitOK || !strings.Contains(errOut, "its recorded vars: dest=s3://attacker-bucket") {
		t.Errorf("one's own run: exit %d\n%s%s", code, out, errOut)
	}
}
