package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const regenerate = "UPDATE_GOLDEN=1 go test ./schema"

// TestReferenceUpToDate keeps docs/plan-reference.md equal to Reference().
// With UPDATE_GOLDEN=1 it rewrites the file instead.
func TestReferenceUpToDate(t *testing.T) {
	path := filepath.Join("..", filepath.FromSlash(referencePath))
	got := Reference()
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatalf("write %s: %v", referencePath, err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v\nGenerate it with: %s", referencePath, err, regenerate)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is out of date with schema/taoflow.schema.json (-file +Reference()):\n%s\nRegenerate it with: %s", referencePath, diff, regenerate)
	}
}

// TestReferenceCoversSchema checks that the reference documents every key
// of the schema, with its default, so the generator cannot drop a section.
func TestReferenceCoversSchema(t *testing.T) {
	ref := Reference()
	doc := schemaDoc(t)
	defs := doc["$defs"].(map[string]any)
	platformObj := doc["properties"].(map[string]any)["platform"].(map[string]any)["oneOf"].([]any)[1].(map[string]any)

	var want []string
	keysOf := func(s map[string]any, prefix string) {
		for k := range s["properties"].(map[string]any) {
			want = append(want, "| `"+prefix+k+"` |")
		}
	}
	keysOf(doc, "")
	keysOf(defs["instance"].(map[string]any), "")
	keysOf(defs["instance"].(map[string]any)["properties"].(map[string]any)["create"].(map[string]any), "create.")
	keysOf(platformObj, "")
	keysOf(defs["step"].(map[string]any), "")
	keysOf(defs["step"].(map[string]any)["properties"].(map[string]any)["retries"].(map[string]any), "retries.")
	for _, kind := range StepKinds() {
		want = append(want, "### `"+kind+"`")
		keysOf(defs["with-"+kind].(map[string]any), "with.")
	}
	for _, w := range want {
		if !strings.Contains(ref, w) {
			t.Errorf("the reference lacks %q", w)
		}
	}

	rows := map[string]string{
		"preflight interval": "| `with.interval` | duration or expression |  | `5s` |",
		"upload-s3 env":      "| `with.env` | list of secret names |  | `[AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]` |",
		"run command":        "| `with.command` | string | without `image` |  |",
		"instance slots":     "| `slots` | integer (1 to 64) |  | `1` |",
		"format version":     "| `taoflow` | `1` | yes |  |",
		"platform":           "| `platform` | `local` / `ssh` / `brev` / `slurm` or mapping |  | `local` |",
		"matrix":             "| `matrix` | `inherit` or mapping of names to lists of strings, numbers or booleans |",
		"needs":              "| `needs` | step id or list of step ids |",
	}
	for name, row := range rows {
		if !strings.Contains(ref, row) {
			t.Errorf("%s: the reference lacks the row %q", name, row)
		}
	}
}

const (
	readmeBegin = "<!-- plan-reference:begin (generated from the schema; UPDATE_GOLDEN=1 go test ./schema rewrites it) -->\n"
	readmeEnd   = "<!-- plan-reference:end -->\n"
)

// TestReadmeReference keeps README.md's plan reference section equal to
// Reference(), with headings one level down.
func TestReadmeReference(t *testing.T) {
	path := filepath.Join("..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	before, rest, ok1 := strings.Cut(text, readmeBegin)
	body, after, ok2 := strings.Cut(rest, readmeEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the plan reference markers %q … %q", readmeBegin, readmeEnd)
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(Reference(), "\n") {
		if strings.HasPrefix(line, "#") {
			line = "#" + line
		}
		want.WriteString(line)
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(before+readmeBegin+want.String()+readmeEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want.String(), body); diff != "" {
		t.Errorf("README.md's plan reference is out of date (-want +README):\n%s\nRegenerate it with: %s", diff, regenerate)
	}
}
