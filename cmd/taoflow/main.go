// Command taoflow runs declarative YAML plans of GPU training work on
// remote instances and always tears down what it created.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// stdio is where a command reads and writes; tests substitute buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}), os.Stderr))
}
