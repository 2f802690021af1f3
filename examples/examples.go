// Package examples holds the example plans of examples/plans, and embeds the
// one that `taoflow init` writes, so that the starter plan a user gets from
// the binary is the same file `make examples` validates, the walkthrough
// (docs/first-plan.md) explains and a test runs.
package examples

import _ "embed"

// FirstPlan is examples/plans/first-plan.yaml: a commented starter plan
// (send, run, wait, fetch, delete) that runs as written on the local
// platform. Callers must not modify it.
//
//go:embed plans/first-plan.yaml
var FirstPlan []byte
