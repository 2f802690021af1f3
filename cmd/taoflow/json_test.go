package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jsonPlan is a sweep whose cell n=2 fails after printing 15 lines, and
// whose jobs report TAO progress.
const jsonPlan = `taoflow: 1
name: js
instances: {a: {slots: 2}}
steps:
  - id: train
    uses: run
    matrix: {n: [1, 2]}
    with:
      results: ~/r/${{ cell.id }}
      command: |
        mkdir -p ~/r/${{ cell.id }}
        echo '{"epoch": 1, "max_epoch": 2, "kpi": {"loss": 0.25}}' >> ~/r/${{ cell.id }}/status.json
        seq 1 15
        [ ${{ matrix.n }} = 2 ] && { echo "python3: can't open file" >&2; exit 2; }
        exit 0
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 50ms}
`

// TestJSONOutput runs the commands that print JSON and checks every object
// they print against the schemas of docs/json.md: every field documented
// with its type, every required field present.
func TestJSONOutput(t *testing.T) {
	schemas := loadSchemas(t, "../../docs/json.md")
	dir := t.TempDir()
	planFile := filepath.Join(dir, "js.yaml")
	if err := os.WriteFile(planFile, []byte(jsonPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	taoflow := func(wantCode int, args ...string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"--state", stateDir}, args...), stdio{in: strings.NewReader(""), out: &out, err: &errOut})
		if code := exitCode(err, &errOut); code != wantCode {
			t.Fatalf("taoflow %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
		}
		return out.Bytes()
	}

	t.Run("status without state", func(t *testing.T) {
		var runs []any
		decode(t, taoflow(0, "status", "--json"), &runs)
		if len(runs) != 0 {
			t.Errorf("status --json without state = %v, want []", runs)
		}
	})

	var runID string
	t.Run("apply events", func(t *testing.T) {
		lines := jsonLines(t, taoflow(1, "apply", "--output", "json", planFile))
		if len(lines) < 3 {
			t.Fatalf("%d lines", len(lines))
		}
		schemas.check(t, "ApplyStarted", lines[0])
		last := lines[len(lines)-1]
		schemas.check(t, "RunEnded", last)
		runID, _ = lines[0]["run_id"].(string)
		progress := false
		for i, e := range lines {
			if e["run_id"] != runID {
				t.Errorf("line %d: run_id %v, want %s", i+1, e["run_id"], runID)
			}
			if i == 0 || i == len(lines)-1 {
				continue
			}
			schemas.check(t, "Event", e)
			if e["type"] == "run-ended" {
				t.Errorf("line %d of %d is a run-ended event: the outcome must be last", i+1, len(lines))
			}
			if p, ok := e["progress"].(map[string]any); ok {
				progress = true
				if p["epoch"] != json.Number("1") || p["max_epoch"] != json.Number("2") || p["loss"] != json.Number("0.25") {
					t.Errorf("progress %v, want epoch 1, max_epoch 2, loss 0.25 as numbers", p)
				}
			}
		}
		if !progress {
			t.Error("no node-progress event with figures")
		}
		if last["type"] != "run-ended" || last["exit_code"] != json.Number("1") || last["state"] != "failed" {
			t.Errorf("last event %v, want run-ended, failed, exit_code 1", last)
		}
		failures, _ := last["failures"].([]any)
		if len(failures) != 1 {
			t.Fatalf("failures %v, want one", last["failures"])
		}
		f := failures[0].(map[string]any)
		tail := fmt.Sprint(f["log_tail"])
		if f["job"] != "train[n=2]" || f["node"] != "wait[n=2]" || f["step"] != "train" || !strings.Contains(tail, "python3: can't open file") || strings.Contains(tail, "[1 ") {
			t.Errorf("failure %v: want job train[n=2] seen by wait[n=2], the log's last lines", f)
		}
	})
	if runID == "" {
		t.Fatal("no run")
	}

	t.Run("status", func(t *testing.T) {
		var runs []map[string]any
		decode(t, taoflow(0, "status", "--json"), &runs)
		if len(runs) != 1 {
			t.Fatalf("%d runs", len(runs))
		}
		schemas.check(t, "Run", runs[0])

		var r map[string]any
		decode(t, taoflow(0, "status", runID, "-o", "json"), &r)
		schemas.check(t, "Run", r)
		nodes, _ := r["nodes"].([]any)
		cells := 0
		for _, n := range nodes {
			n := n.(map[string]any)
			if c, ok := n["cell"].(map[string]any); ok {
				if v, _ := c["values"].(map[string]any); v["n"] == nil {
					t.Errorf("node %s: cell %v without its values", n["id"], c)
				}
				cells++
			}
			if n["id"] == "wait[n=2]" && n["failed_job"] != "train[n=2]" {
				t.Errorf("wait[n=2]: failed_job %v, want train[n=2]", n["failed_job"])
			}
		}
		if cells != 4 {
			t.Errorf("%d nodes with a cell, want 4", cells)
		}
	})

	t.Run("logs", func(t *testing.T) {
		lines := jsonLines(t, taoflow(0, "logs", runID, "wait", "--json"))
		for _, l := range lines {
			schemas.check(t, "LogLine", l)
		}
		if len(lines) < 15 {
			t.Errorf("%d log lines", len(lines))
		}
	})

	t.Run("version", func(t *testing.T) {
		var v map[string]any
		decode(t, taoflow(0, "version", "--json"), &v)
		schemas.check(t, "Version", v)
	})

	t.Run("validate", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte("taoflow: 7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var reports []map[string]any
		decode(t, taoflow(2, "validate", "-o", "json", planFile, bad), &reports)
		for _, r := range reports {
			schemas.check(t, "ValidateReport", r)
		}
	})
}

// schemas are the field tables of docs/json.md, by section.
type schemas map[string]map[string]fieldType

type fieldType struct {
	typ      string // string, integer, number, boolean, object, "array of X", or a section
	optional bool
}

var (
	sectionRE = regexp.MustCompile(`^### (\w+)$`)
	fieldRE   = regexp.MustCompile("^\\| `(\\w+)` \\| ([^|]+?) \\|")
)

func loadSchemas(t *testing.T, path string) schemas {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := schemas{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := sectionRE.FindStringSubmatch(sc.Text()); m != nil {
			section = m[1]
			s[section] = map[string]fieldType{}
			continue
		}
		if m := fieldRE.FindStringSubmatch(sc.Text()); m != nil && section != "" {
			typ, opt := strings.CutSuffix(m[2], ", optional")
			s[section][m[1]] = fieldType{typ: typ, optional: opt}
		}
	}
	if len(s) < 10 {
		t.Fatalf("%s: only %d schemas found", path, len(s))
	}
	return s
}

// check reports every way v differs from section's schema.
func (s schemas) check(t *testing.T, section string, v any) {
	t.Helper()
	for _, problem := range s.problems(section, v, section) {
		t.Error(problem)
	}
}

func (s schemas) problems(section string, v any, path string) []string {
	fields, ok := s[section]
	if !ok {
		return []string{fmt.Sprintf("%s: docs/json.md has no section %s", path, section)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: %v is not an object", path, v)}
	}
	var out []string
	for k, val := range obj {
		ft, ok := fields[k]
		if !ok {
			out = append(out, fmt.Sprintf("%s.%s: not in docs/json.md (section %s)", path, k, section))
			continue
		}
		out = append(out, s.typeProblems(ft.typ, val, path+"."+k)...)
	}
	for k, ft := range fields {
		if _, ok := obj[k]; !ok && !ft.optional {
			out = append(out, fmt.Sprintf("%s.%s: missing, and docs/json.md says it is always there", path, k))
		}
	}
	return out
}

func (s schemas) typeProblems(typ string, v any, path string) []string {
	bad := []string{fmt.Sprintf("%s: %#v is not %s", path, v, typ)}
	switch typ {
	case "string":
		if _, ok := v.(string); !ok {
			return bad
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad
		}
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return bad
		}
		if _, err := n.Int64(); typ == "integer" && err != nil {
			return bad
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return bad
		}
	default:
		if elem, ok := strings.CutPrefix(typ, "array of "); ok {
			arr, ok := v.([]any)
			if !ok {
				return bad
			}
			var out []string
			for i, e := range arr {
				out = append(out, s.typeProblems(elem, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
			return out
		}
		return s.problems(typ, v, path)
	}
	return nil
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in:\n%s", b)
	}
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m map[string]any
			decode(t, line, &m)
			out = append(out, m)
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
