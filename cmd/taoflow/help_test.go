package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/schema"
)

// TestHelpListsEveryStepKind: `taoflow --help` lists every step kind the
// schema accepts, with the schema's summary, in the schema's order: a kind
// added to the schema cannot be missing from the help.
func TestHelpListsEveryStepKind(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}); err != nil {
		t.Fatalf("taoflow --help: %v\n%s", err, errb.String())
	}
	help := out.String()
	last := -1
	for _, k := range schema.StepKinds() {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(k) + ` +` + regexp.QuoteMeta(schema.StepSummary(k)) + `$`)
		loc := re.FindStringIndex(help)
		if loc == nil {
			t.Errorf("--help does not list step kind %q with its summary %q", k, schema.StepSummary(k))
			continue
		}
		if loc[0] < last {
			t.Errorf("--help lists %q out of the schema's order", k)
		}
		last = loc[0]
	}
}
