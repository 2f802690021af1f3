package steps

import "github.com/taoflow/taoflow/internal/provenance"

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
