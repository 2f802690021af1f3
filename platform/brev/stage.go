package brev

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// brevArgLen is the length command takes in the argument of `bash -c`
// that brev builds, where it single-quotes it, each single quote growing
// to four bytes.
func brevArgLen(command string) int {
	return len(command) + 3*strings.Count(command, "'")
}

// stageDir is the remote directory (mode 0700) that the pieces of the
// staged script nonce go to.
func stageDir(nonce string) string { return `"${TMPDIR:-/tmp}/.taoflow-` + nonce + `.d"` }

// stageOK is the shell test that the staging directory d is there, a
// directory and no link, and this user's own.
const stageOK = `[ -d "$d" ] && [ ! -h "$d" ] && [ -O "$d" ]`

// shortMarker is what the run command of a staged script prints, instead
// of running it, when its pieces do not make a whole script.
func shortMarker(nonce string) string { return "__TAOFLOW_SHORT_" + nonce }

// stagePieces is script (as platform.ScriptBody, for sourcing on fd 3)
// gzipped and base64-encoded, in pieces of at most pieceSize bytes.
func stagePieces(script string) ([]string, error) {
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write([]byte(platform.ScriptBody(script))); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	text := base64.StdEncoding.EncodeToString(z.Bytes())
	var pieces []string
	for len(text) > 0 {
		n := min(pieceSize, len(text))
		pieces = append(pieces, text[:n])
		text = text[n:]
	}
	return pieces, nil
}

// pieceCommand writes piece k to the staging directory of nonce (made,
// 0700, by the first piece to come) and prints the marker with 0, or with
// 1 when it could not. It always exits 0, so brev never runs it twice,
// and running it twice would write the same file again.
func pieceCommand(nonce string, k int, piece string) string {
	return `d=` + stageDir(nonce) + `; rc=1; { mkdir -m 700 "$d" 2>/dev/null || ` + stageOK + `; } && ` +
		`printf %s '` + piece + `' >"$d/` + strconv.Itoa(k) + `" && rc=0; printf '\n` + marker(nonce) + `%d\n' "$rc"`
}

// runStagedCommand joins the n pieces of nonce, decodes them, checks them
// whole (gzip's length and CRC-32), removes the directory, and runs the
// script as platform.ScriptCommand does, then prints its exit code after
// the marker. Pieces that are missing or corrupt print shortMarker and
// run nothing.
func runStagedCommand(nonce string, n int) string {
	files := make([]string, n)
	for k := range files {
		files[k] = `"$d/` + strconv.Itoa(k) + `"`
	}
	return `d=` + stageDir(nonce) + `; if ` + stageOK + ` && cat ` + strings.Join(files, " ") +
		` 2>/dev/null | base64 -d 2>/dev/null | gzip -dc >"$d/s" 2>/dev/null; then ` +
		`exec 3<"$d/s"; rm -rf "$d"; sh -c '` + platform.ScriptCommand + `'; rc=$?; exec 3<&-; ` +
		`printf '\n` + marker(nonce) + `%d\n' "$rc"; else rm -rf "$d"; printf '\n` + shortMarker(nonce) + `\n'; fi`
}

// unstageCommand removes the staging directory of nonce.
func unstageCommand(nonce string) string {
	return `d=` + stageDir(nonce) + `; ! ` + stageOK + ` || rm -rf "$d"; printf '\n` + marker(nonce) + `0\n'`
}

// stagedExec runs a script too long for one brev exec command line: it
// writes it to the instance in pieces, gzipped and base64-encoded, each
// piece one brev exec well under the kernel's limit on an argument, then
// runs it with one more. A failure while staging removes what was
// staged, and the script has not run.
func (b *Brev) stagedExec(ctx context.Context, inst platform.Instance, bin, script, nonce string) (platform.Result, error) {
	fail := platform.Result{ExitCode: -1}
	pieces, err := stagePieces(script)
	if err != nil {
		return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf("compressing the script: %w", err)}
	}
	unstage := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = b.execOnce(cctx, inst, bin, unstageCommand(nonce), nonce)
	}
	for k, piece := range pieces {
		res, err := b.execOnce(ctx, inst, bin, pieceCommand(nonce, k, piece), nonce)
		if err != nil {
			if ctx.Err() == nil {
				unstage()
			}
			return res, err
		}
		if res.ExitCode != 0 {
			unstage()
			return fail, &platform.ExecError{Instance: inst.Name, Err: fmt.Errorf(
				"staging the script (%d bytes) on the instance: piece %d of %d could not be written under $TMPDIR or /tmp; it did not run", len(script), k+1, len(pieces))}
		}
	}
	res, err := b.execOnce(ctx, inst, bin, runStagedCommand(nonce, len(pieces)), nonce)
	if err != nil {
		var ee *platform.ExecError
		if errors.As(err, &ee) && bytes.Contains(res.Stdout, []byte(shortMarker(nonce))) {
			ee.Transient = true
			ee.Err = fmt.Errorf("brev exec: %w (its %d pieces did not make it whole)", platform.ErrScriptShort, len(pieces))
		}
		return res, err
	}
	return res, nil
}
