// Command taoflow runs declarative YAML plans of GPU training work on
// remote instances and always tears down what it created.
package main

import (
	"context"
	"io"
	"os"
)

// stdio is where a command reads and writes; tests substitute buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func main() {
	// Signals are handled by the commands that need them (apply's three-stage
	// Ctrl-C); the others keep the default: Ctrl-C ends them.
	os.Exit(exitCode(run(context.Background(), os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}), os.Stderr))
}
