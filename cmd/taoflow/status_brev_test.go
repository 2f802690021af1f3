package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform/brev/brevtest"
)

const brevOwnBinary = `taoflow: 1
name: brev-own
platform: {kind: brev, binary: "./my tools/brev"}
instances:
  gpu: {create: {type: g5.xlarge}, keep: true}
steps:
  - id: hello
    uses: run
    with: {command: "echo hello"}
  - id: wait
    uses: wait
    needs: [hello]
    with: {interval: 100ms, timeout: 5m}
`

// shellWords splits a command line as sh does for the words taoflow
// prints: blanks between words, '…' quoting.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unbalanced quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in, quoted = true, true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in, quoted = false, false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in || quoted {
		words = append(words, cur.String())
	}
	return words
}

// TestStatusAdviceAndUnpricedCost: a run whose plan names its own brev
// program (in a directory with a blank in its name) keeps an instance;
// status prints the destroy command with the --brev-binary that destroy
// asks for, quoted, and that command, run as printed, removes it (exit 0,
// not 2). apply itself is given --brev-binary: --yes does not approve a
// program the plan names. brev search failed, so the type has no price: the cost total
// says it leaves one instance out, in text and JSON.
func TestStatusAdviceAndUnpricedCost(t *testing.T) {
	f, dir := brevEnv(t, brevtest.Options{})
	own := filepath.Join(dir, "my tools", "brev")
	if err := os.MkdirAll(filepath.Dir(own), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, b, 0o700); err != nil {
		t.Fatal(err)
	}
	writePlan(t, "own.yaml", brevOwnBinary)
	f.Inject(brevtest.Fault{Kind: "search-error"})
	code, out, errOut := applyCLI(t, "apply", "--yes", "--brev-binary", own, "--output", "plain", "own.yaml")
	if code != exitOK {
		t.Fatalf("apply exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "+ 1 instance of unknown price at Brev list prices") {
		t.Errorf("apply's cost total hides the unpriced instance:\n%s", errOut)
	}
	want := "taoflow destroy brev-own-"
	m := regexp.MustCompile(`kept \(keep: true\); it bills until: (taoflow destroy \S+ --yes.*)`).FindStringSubmatch(errOut)
	if m == nil || !strings.Contains(m[1], "--brev-binary '"+own+"'") {
		t.Errorf("apply's advice does not name the run's brev program:\n%s", errOut)
	}

	code, out, errOut = applyCLI(t, "status", "latest")
	if code != exitOK {
		t.Fatalf("status exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "cost ~$0.00 + 1 instance of unknown price at Brev list prices") {
		t.Errorf("status's cost total hides the unpriced instance:\n%s", out)
	}
	m = regexp.MustCompile(`(?m)^remove them with: (.*)$`).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(m[1], want) {
		t.Fatalf("status gives no destroy command:\n%s", out)
	}
	advice := m[1]
	if !strings.Contains(advice, " --yes --brev-binary '"+own+"'") {
		t.Errorf("status's destroy command lacks the run's --brev-binary: %s", advice)
	}
	code, out, _ = applyCLI(t, "status", "--json", "latest")
	var st struct {
		Cost struct {
			Total    float64 `json:"total"`
			Unpriced int     `json:"unpriced_instances"`
		} `json:"cost"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if st.Cost.Unpriced != 1 || st.Cost.Total != 0 {
		t.Errorf("status --json cost: %+v, want 1 unpriced instance", st.Cost)
	}

	// The advice works as printed.
	words := shellWords(t, advice)
	code, out, errOut = applyCLI(t, words[1:]...)
	if code != exitOK {
		t.Fatalf("%s: exit %d\n%s%s", advice, code, out, errOut)
	}
	f.CheckNoneAlive(t)
}
