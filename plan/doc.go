// Package plan turns a taoflow plan file (YAML, format 1) into a positioned
// model and reports every problem in it at once.
//
// Loading keeps the position of every key and value: the YAML node tree is
// resolved (aliases and merge keys expanded, with a bound so an alias bomb
// cannot exhaust memory), validated against the JSON Schema of package
// schema through a JSON-pointer → position index, and then checked
// statically (ids, references, cycles, durations and numbers, matrix and
// node bounds, expressions and their typos, inline secrets, ordering of
// uploads and deletes). A run step's command is read with a shell parser
// (mvdan.cc/sh) so that every ${{ }} stands where its value, substituted as
// one quoted word, stays one word (shell.go); a container's command must be
// nothing but words, each within the kernel's argument limit (argv.go).
// Problems are Diagnostics, rendered once at the edge as
// "plan.yaml:12:7: error: message".
//
// The package does no I/O beyond reading the plan file; expanding a plan
// into the nodes that run is the engine's job.
package plan
