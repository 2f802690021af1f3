package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// brevReportPlan: a two-cell sweep on one brev instance chosen by GPU (so
// pricing knows its type's list price); one cell prints the secret and
// fails, so the report's failure section shows the end of its log.
const brevReportPlan = `taoflow: 1
name: brev-report
platform: brev
vars: {dest: ""}
secrets: [MY_SECRET]
instances:
  gpu: {create: {gpu: H100, gpus: 1}}
steps:
  - id: train
    uses: run
    matrix: {lr: [good, bad]}
    with:
      env: [MY_SECRET]
      results: ~/results/${{ cell.id }}
      command: |
        mkdir -p ~/results/${{ cell.id }}
        echo "the secret is $MY_SECRET"
        echo '{"epoch": 1, "loss": 0.5}' > ~/results/${{ cell.id }}/status.json
        if [ ${{ matrix.lr }} = bad ]; then echo "diverged: $MY_SECRET" >&2; exit 3; fi
        echo weights > ~/results/${{ cell.id }}/model.pth
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 100ms}
  - id: upload
    uses: upload-s3
    needs: [wait]
    matrix: inherit
    with: {from: "~/results/${{ cell.id }}", to: "${{ vars.dest }}/${{ cell.id }}"}
  - id: bring
    uses: fetch
    needs: [upload]
    matrix: inherit
    with: {from: "~/results/${{ cell.id }}", to: "fetched/${{ cell.id }}"}
finally:
  - id: teardown
    uses: delete
`

// TestBrevReport: apply --report against the fake brev writes a report
// that names the created instance, its type and its list price and cost,
// shows both cells with their matrix values and where the good one's
// results went, shows the failed cell's log redacted, never holds the
// secret's value, and refers to nothing outside itself (issue 26).
func TestBrevReport(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	writePlan(t, "report.yaml", brevReportPlan)
	const secretValue = "brev-report-s3cr3t-9876543210"
	t.Setenv("MY_SECRET", secretValue)
	file := filepath.Join(dir, "report.html")
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "report.yaml",
		"--var", "dest=file://"+dir+"/results", "--report", file)
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1 (one cell fails)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("apply --report wrote no report: %v\nstderr:\n%s", err, errOut)
	}
	page := string(raw)
	defer func() {
		if t.Failed() {
			t.Logf("report:\n%s", page)
		}
	}()
	if strings.Contains(page, secretValue) {
		t.Error("the report holds the secret's value")
	}
	if !strings.Contains(page, "diverged: ***") {
		t.Error("the report does not show the end of the failed cell's log, redacted")
	}
	for _, want := range []string{
		// The created instance, its platform, type, state and list price.
		"<td>gpu</td><td>brev</td><td>gpu_1x_h100_sxm5</td><td><span class=\"st st-deleted\">deleted</span>",
		"<td>$3.29/h</td>",
		// The cells: in the node graph, and in the results with their
		// matrix values and where their results went.
		"<span>train[lr=good]</span>", "<span>train[lr=bad]</span>",
		"<td>lr-good</td><td>good</td>", "<td>lr-bad</td><td>bad</td>",
		"local: <code>" + dir + "/results/lr-good</code>",
		// and where the fetch copied them on this machine.
		"local: <code>" + dir + "/fetched/lr-good</code>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if !regexp.MustCompile(`<td>\$3\.29/h</td><td>\$\d+\.\d\d</td>`).MatchString(page) {
		t.Error("the report has no cost for the instance")
	}
	// results --json lists both, the fetch's as an absolute path.
	code, out, errOut = applyCLI(t, "results", "--json", "latest")
	if code != exitOK {
		t.Fatalf("results exit %d\n%s", code, errOut)
	}
	var table struct {
		Rows []struct {
			Cell    string
			Results []string
		}
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		t.Fatal(err)
	}
	want := []string{"file://" + dir + "/results/lr-good", dir + "/fetched/lr-good"}
	if len(table.Rows) != 2 || table.Rows[0].Cell != "lr-good" || !slices.Equal(table.Rows[0].Results, want) {
		t.Errorf("results --json rows %+v; want lr-good's results %q", table.Rows, want)
	}
	if m := regexp.MustCompile(`(?i)(src|href|action|url)\s*[=(]\s*["']?\s*(https?:)?//`).FindString(page); m != "" {
		t.Errorf("the report refers to something outside itself: %q", m)
	}
}
