package main

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

// brevUploadFailsFetched: the upload-s3 of the results fails after it
// started (file:///proc cannot be written), and a fetch of the same
// directory, which starts after it, copies and verifies them.
const brevUploadFailsFetched = `taoflow: 1
name: brev-fetched
platform: brev
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with: {command: "mkdir -p ~/results && echo weights > ~/results/model.pth", results: ~/results}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
  - id: upload
    uses: upload-s3
    needs: [wait]
    continue_on_error: true
    with: {from: "~/results", to: "file:///proc/taoflow-cannot-write-here"}
  - id: bring
    uses: fetch
    needs: [upload]
    with: {from: "~/results", to: fetched}
finally:
  - id: teardown
    uses: delete
`

// TestBrevUploadFailedButFetched: a verified fetch of the results that
// an upload failed to copy saves them: the instance is deleted, not kept
// billing, and the run ends as failed (exit 1), not exit 3 (issue 21 item
// 4; docs/design.md §2.1).
func TestBrevUploadFailedButFetched(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	writePlan(t, "fetched.yaml", brevUploadFailsFetched)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "fetched.yaml")
	if code != exitFailed {
		t.Fatalf("apply exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "upload@gpu on gpu: failed: upload failed") || !strings.Contains(out, "bring@gpu on gpu: succeeded") {
		t.Errorf("want the upload failed and the fetch succeeded:\n%s", out)
	}
	if !strings.Contains(out, "instance gpu: deleted") || strings.Contains(out, "stopped instead of deleted") {
		t.Errorf("the instance whose results were fetched is not deleted:\n%s", out)
	}
	if strings.Contains(errOut, "bills for its disk") || strings.Contains(errOut, "may still exist") {
		t.Errorf("the end of the run speaks of billing:\n%s", errOut)
	}
	f.CheckNoneAlive(t)
}

const brevTrainOnly = `taoflow: 1
name: brev-delfail
platform: brev
instances:
  gpu: {create: {type: g5.xlarge}}
steps:
  - id: train
    uses: run
    with: {command: "true"}
  - id: wait
    uses: wait
    needs: [train]
    with: {interval: 100ms}
`

// TestBrevDeleteFailsExit3: a created instance whose delete fails may
// still exist, and bill: exit 3, said so with the destroy command (the
// one case, with a stopped or left-running instance, that §2.1 gives 3).
func TestBrevDeleteFailsExit3(t *testing.T) {
	f, _ := brevEnv(t, brevtest.Options{})
	f.Inject(brevtest.Fault{Kind: "delete-error", Times: 8})
	writePlan(t, "delfail.yaml", brevTrainOnly)
	code, out, errOut := applyCLI(t, "apply", "--yes", "--output", "plain", "delfail.yaml")
	if code != exitTeardown {
		t.Fatalf("apply exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "instance gpu: NOT RELEASED") {
		t.Errorf("the view does not say the instance was not released:\n%s", out)
	}
	if !strings.Contains(errOut, "these may still exist (and bill): gpu") || !strings.Contains(errOut, "remove them with: taoflow destroy brev-delfail-") {
		t.Errorf("the end of the run does not say it may bill, and how to remove it:\n%s", errOut)
	}
	// The faults run out: destroy, repeated, removes it.
	code, out, errOut = applyCLI(t, "destroy", "latest", "--yes")
	for i := 0; code != exitOK && i < 60; i++ {
		code, out, errOut = applyCLI(t, "destroy", "latest", "--yes")
	}
	if code != exitOK {
		t.Fatalf("destroy exit %d\n%s%s", code, out, errOut)
	}
	f.CheckNoneAlive(t)
}
