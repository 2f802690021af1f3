package steps

import (
	"regexp"
	"strings"

	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/plan"
)

// RunRecord is what a run records about itself for its manifests.
type RunRecord struct {
	Name       string            // apply --name; empty when none
	Tags       map[string]string // nil when none
	Provenance *provenance.Info  // nil when unknown
}

// TAOJob is what a TAO command says about itself: `<arch> <action> -e …`
// (visual_changenet train -e spec.yaml), or with.tao.
type TAOJob struct {
	NetworkArch string `json:"network_arch"`
	Action      string `json:"action"`
}

// TAOJobOf returns what with.tao says about a run step's job, or else
// what its command says: a line `<arch> <action> -e …` (or
// `--experiment_spec…`), or `tao model <arch> <action> …`.
func TAOJobOf(with *plan.Value) (TAOJob, bool) {
	if t := with.Get("tao"); t != nil {
		j := TAOJob{NetworkArch: withString(t, "network_arch"), Action: withString(t, "action")}
		return j, j.NetworkArch != "" && j.Action != ""
	}
	return ParseTAOCommand(withString(with, "command"))
}

var taoWord = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ParseTAOCommand finds the TAO network architecture and action in a
// command.
func ParseTAOCommand(cmd string) (TAOJob, bool) {
	for _, line := range strings.Split(cmd, "\n") {
		f := strings.Fields(line)
		for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
			f = f[1:] // VAR=value before the command
		}
		if len(f) >= 4 && f[0] == "tao" && f[1] == "model" && taoWord.MatchString(f[2]) && taoWord.MatchString(f[3]) {
			return TAOJob{NetworkArch: f[2], Action: f[3]}, true
		}
		if len(f) >= 3 && taoWord.MatchString(f[0]) && taoWord.MatchString(f[1]) &&
			(f[2] == "-e" || strings.HasPrefix(f[2], "--experiment_spec")) {
			return TAOJob{NetworkArch: f[0], Action: f[1]}, true
		}
	}
	return TAOJob{}, false
}
