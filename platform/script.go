package platform

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// How scripts travel. A script never goes on a command line: the kernel
// caps one argument at 128 KiB (MAX_ARG_STRLEN), and a command line is
// seen by every user of the machine (ps). Every platform's argv carries a
// short fixed command, and the script reaches the shell another way: on
// file descriptor 3 (local, ScriptFD), framed ahead of the job's stdin
// (ssh, whose remote wrapper reads exactly its length into a private file
// first), or in pieces of bounded size (brev exec). The one limit left is
// MaxScript, which CheckScript names.

// MaxScript is the longest script Exec runs: 64 MiB. A script is what a
// step sends, its command and parameters included (a manifest the
// instance writes, say); data belongs on stdin or in files.
const MaxScript = 64 << 20

// CheckScript returns an error when no platform can run script: it holds a
// NUL byte (a shell cannot read one), or it is longer than MaxScript. The
// error names the limit and never holds the script.
func CheckScript(script string) error {
	if len(script) > MaxScript {
		return fmt.Errorf("the script is %d bytes, over the %d-byte (%d MiB) limit on one script: put large data in files (a results directory, a send step) instead of the command", len(script), MaxScript, MaxScript>>20)
	}
	if i := strings.IndexByte(script, 0); i >= 0 {
		return fmt.Errorf("the script holds a NUL byte (at byte %d): a shell cannot run it", i)
	}
	return nil
}

// ScriptCommand is the fixed command line (for sh -c) that runs the
// script on file descriptor 3: it is sourced, so it runs in the shell
// itself, as sh -c SCRIPT would run it ($0 is the shell, no positional
// parameters, exit ends the shell). Feed fd 3 with ScriptBody.
const ScriptCommand = ". /dev/fd/3"

// ScriptBody is what goes on the script's descriptor: script, after a
// prologue that closes descriptor 3 (the shell holds the script open on a
// descriptor of its own by then), so that nothing the script starts
// inherits it. The prologue ends with "; ", not a newline, so line numbers
// in the shell's messages are the script's own.
func ScriptBody(script string) string { return ScriptPrologue + script }

// ScriptPrologue is what ScriptBody puts before a script.
const ScriptPrologue = "exec 3<&-; "

// ScriptFD makes cmd (whose argv is `sh -c ScriptCommand`) read script on
// its file descriptor 3, a pipe, so that its stdin stays the job's.
// Call it before cmd.Start, and call the returned start right after a
// successful Start: it closes this process's copy of the pipe's read end
// and writes the script in the background. The returned done must be
// called after Wait: it stops a write that the shell left unread (a
// script that exited before reading itself whole).
func ScriptFD(cmd *exec.Cmd, script string) (start func(), done func(), err error) {
	if len(cmd.ExtraFiles) != 0 {
		return nil, nil, errors.New("script pipe: the command has extra files already")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("script pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{r}
	start = func() {
		_ = r.Close()
		go func() {
			// Not ScriptBody: no copy of a long script. EPIPE when the
			// shell exits before it has read it all.
			if _, err := io.WriteString(w, ScriptPrologue); err == nil {
				_, _ = io.WriteString(w, script)
			}
			_ = w.Close()
		}()
	}
	done = func() {
		_ = r.Close()
		_ = w.Close() // ends a write still blocked on a pipe nobody reads
	}
	return start, done, nil
}

// ErrScriptShort is the error (wrapped) of a script that did not reach
// the instance whole: the connection ended while it was sent. The script
// did not run.
var ErrScriptShort = errors.New("the script did not reach the instance whole; it did not run")
