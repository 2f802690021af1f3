package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/term"

	"github.com/taoflow/taoflow/plan"
)

// diagPrinter prints human diagnostics, each followed by its source line
// and a caret under the column when snippets are on (validate --snippet,
// or stderr is a terminal). The source is read back from the file the
// position names (a plan or a --var-file), once per file; a file that
// cannot be read gets no snippet.
type diagPrinter struct {
	w        io.Writer
	snippets bool
	src      map[string][]byte
}

// newDiagPrinter prints to w, with snippets when force is set or w is a
// terminal.
func newDiagPrinter(w io.Writer, force bool) *diagPrinter {
	on := force
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		on = true
	}
	// A message may quote a value, and a snippet is a line of the file:
	// escaped as the rest of the human output.
	return &diagPrinter{w: escapeWriter{w}, snippets: on, src: map[string][]byte{}}
}

func (p *diagPrinter) print(d plan.Diagnostic) {
	fmt.Fprintln(p.w, d)
	if !p.snippets || d.Pos.File == "" || d.Pos.Line == 0 {
		return
	}
	b, ok := p.src[d.Pos.File]
	if !ok {
		b = readSource(d.Pos.File)
		p.src[d.Pos.File] = b
	}
	fmt.Fprint(p.w, plan.Snippet(b, d.Pos))
}

// readSource reads a plan or var file back for snippets: a regular file,
// at most plan.MaxFileSize bytes (what plan.Load read), or nothing.
func readSource(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, plan.MaxFileSize+1))
	if err != nil || len(b) > plan.MaxFileSize {
		return nil
	}
	return b
}
