package plan_test

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestPathVarOverride: a --var that takes a path out of its directory is
// found at validate (issue 22 item 11), as the plan's own value is; the
// overrides are applied before the checks.
func TestPathVarOverride(t *testing.T) {
	src := []byte(`taoflow: 1
name: override
vars: {sub: ok}
instances: {box: {}}
steps:
  - id: train
    uses: run
    with: {command: train, results: "~/out/x${{ vars.sub }}/${{ run.id }}"}
  - {id: wait, uses: wait, needs: [train]}
  - id: save
    uses: fetch
    needs: [wait]
    with: {from: "~/out/x${{ vars.sub }}/${{ run.id }}", to: out}
`)
	if _, diags := plan.Parse("plan.yaml", src, plan.Options{}); diags.HasErrors() {
		t.Fatalf("the plan as written: %s", render(diags))
	}
	for _, bad := range []string{"/../..", "/.."} {
		_, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"sub": bad}})
		got := render(diags)
		if !strings.Contains(got, "plan.yaml:8:") || !strings.Contains(got, "--var sub=") || !strings.Contains(got, "with.results") {
			t.Errorf("--var sub=%s: want an error at with.results naming the --var; got\n%s", bad, got)
		}
	}
}

// TestS3SecretsFromVar: an upload whose s3:// URL comes from a --var needs
// the AWS keys declared too.
func TestS3SecretsFromVar(t *testing.T) {
	src := []byte(`taoflow: 1
name: s3var
vars: {dest: "file:///srv/out"}
instances: {box: {}}
steps:
  - id: up
    uses: upload-s3
    with: {from: ~/out, to: "${{ vars.dest }}/${{ run.id }}"}
`)
	if _, diags := plan.Parse("plan.yaml", src, plan.Options{}); diags.HasErrors() {
		t.Fatalf("file:// needs no secrets: %s", render(diags))
	}
	_, diags := plan.Parse("plan.yaml", src, plan.Options{Vars: map[string]string{"dest": "s3://bucket/x"}})
	if got := render(diags); !strings.Contains(got, "plan.yaml:8:29: error:") || !strings.Contains(got, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY to secrets:") {
		t.Errorf("want the implied secrets named at with.to; got\n%s", got)
	}
}
