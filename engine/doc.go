// Package engine expands a plan into the graph of nodes that run, and runs
// it.
//
// Expansion is pure and deterministic: a step without a matrix becomes one
// node per instance of its pool ("pull@gpu-a"), a matrix step one node per
// cell ("train[lr=0.001]"), placed on an instance at run time, and a
// `matrix: inherit` step one node per cell of the step it inherits from,
// following that cell to its instance. Dependencies pair as
// docs/design.md §4.2 says; the ones that depend on placement are kept
// symbolic (Dep kinds) and resolved by the scheduler.
//
// The engine never prints and never imports a concrete platform. A node's
// progress reaches it as a progress.Report (Task.Progress) and leaves as a
// NodeProgress Event with the line in Message and the figures in
// Event.Progress; the metric values it brings for the run's series leave
// as a NodeMetrics Event (Event.Points).
package engine
