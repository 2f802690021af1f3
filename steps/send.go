package steps

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/internal/gitcli"
	"github.com/taoflow/taoflow/platform"
)

// Exit codes of the transfer scripts (list.sh, send.sh, fetch.sh).
const (
	exitNoPath    = 80 // list.sh, fetch.sh: the path does not exist / is not a directory
	exitNoWrite   = 84 // send.sh: cannot create the temporary directory next to the destination
	exitExtract   = 85 // send.sh: tar failed (a full disk, a broken archive)
	exitCountDiff = 86 // send.sh: the extracted copy does not hold what was sent
	exitRename    = 87 // send.sh: cannot rename the copy into place
)

// localPath is a laptop path of a send or fetch: relative ones are taken
// from the plan's directory (or, without a plan file, BaseDir).
func (s *Steps) localPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	base := s.cfg.BaseDir
	if s.cfg.Plan != nil && s.cfg.Plan.File != "" {
		base = s.cfg.Plan.Dir()
	}
	return filepath.Join(base, p)
}

// sendParams reads a send step's with: from (resolved on this machine),
// to and the exclude matchers.
func (s *Steps) sendParams(req Request) (from, to string, excludes []string, err error) {
	from, to = withString(req.With, "from"), withString(req.With, "to")
	if from == "" || to == "" {
		return "", "", nil, &Error{Class: ClassInvalidConfig, Msg: "send needs with.from and with.to"}
	}
	if err := confinedPaths(req, "from", "to"); err != nil {
		return "", "", nil, err
	}
	if t := strings.TrimRight(to, "/"); t == "" || t == "~" || t == "." || t == ".." {
		return "", "", nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q would replace a whole home or root directory: send replaces its destination, so name a directory under it (~/specs)", to)}
	}
	return s.localPath(from), to, withList(req.With, "exclude"), nil
}

// send copies with.from on this machine to with.to on the instance: one
// tar archive streamed over Exec's stdin into send.sh, which extracts it
// next to the destination, checks the counts and renames it into place.
// When the destination already lists the same tree (send.sh compares the
// digest of its listing with the local tree's before it reads stdin),
// nothing is extracted: one session either way, no listing round trip
// before the data.
func (s *Steps) send(ctx context.Context, req Request) error {
	from, to, patterns, err := s.sendParams(req)
	if err != nil {
		return err
	}
	excludes, err := excludeMatchers(patterns)
	if err != nil {
		return err
	}
	inst := req.Instance
	files, local, repo, err := s.sendFiles(ctx, from, excludes)
	if err != nil {
		return err
	}
	nf, nb, nl := local.counts()

	fmt.Fprintf(req.Log, "sending %s (%d files, %d bytes%s) to %s on %s\n", from, nf, nb, repo, to, inst.Name)
	script := script(Params{
		"dst":         to,
		"want_files":  strconv.FormatInt(nf, 10),
		"want_bytes":  strconv.FormatInt(nb, 10),
		"want_links":  strconv.FormatInt(nl, 10),
		"want_digest": local.digest(),
	}, "send")
	res, werr, err := s.execArchive(ctx, inst, script, files)
	if err == nil && res.ExitCode == 0 && sameLine(res.Stdout) {
		fmt.Fprintf(req.Log, "%s on %s already holds %s (%d files, %d bytes): nothing to send\n", to, inst.Name, from, nf, nb)
		return nil
	}
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassSendFailed, err, "sending %s to %s on %s: %v", from, to, inst.Name, err)
	case werr != nil && res.ExitCode != 0:
		return s.fail(ClassSendFailed, werr, "reading %s while sending it: %v (nothing was written to %s)", from, werr, to)
	case res.ExitCode == exitNoWrite:
		return s.fail(ClassSendFailed, nil, "%s on %s cannot be written: %s", to, inst.Name, s.lastLine(res.Stderr))
	case res.ExitCode == exitExtract:
		return s.fail(ClassSendFailed, nil, "extracting into %s on %s failed%s: %s (%s was left as it was)", to, inst.Name, diskFull(res.Stderr, "the instance's"), s.tarError(res.Stderr), to)
	case res.ExitCode == exitCountDiff:
		return s.fail(ClassMismatch, nil, "sent %d files (%d bytes) and %d symlinks from %s, but the copy on %s holds %s (%s was left as it was)", nf, nb, nl, from, inst.Name, gotLine(res.Stdout), to)
	case res.ExitCode != 0:
		return s.fail(ClassSendFailed, nil, "sending %s to %s on %s failed (exit code %d): %s", from, to, inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	case werr != nil:
		return s.fail(ClassSendFailed, werr, "reading %s while sending it: %v", from, werr)
	}
	fmt.Fprintf(req.Log, "sent %d files (%d bytes) and %d symlinks to %s on %s; verified\n", nf, nb, nl, to, inst.Name)
	return nil
}

// gitListTimeout bounds the git commands that list what a send of a work
// tree copies.
const gitListTimeout = 2 * time.Minute

// sendFiles lists what a send copies of from on this machine. When from
// is a directory in a git work tree (and not one the repository ignores),
// that is what git would commit: the tracked files and the untracked ones
// no .gitignore rule ignores (gitcli.Files), and repo says so for the
// log; otherwise every file. Never sent: .git, and taoflow's state
// directory.
func (s *Steps) sendFiles(ctx context.Context, from string, excludes []*regexp.Regexp) (files []localFile, t tree, repo string, err error) {
	fi, err := os.Stat(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, "", s.fail(ClassSendFailed, nil, "with.from: %s does not exist on this machine", from)
	}
	if err != nil {
		return nil, nil, "", s.fail(ClassSendFailed, err, "reading %s: %v", from, err)
	}
	var skip []string
	if rel, ok := within(from, s.cfg.StateDir); ok {
		skip = append(skip, rel)
	}
	var listed []string
	if fi.IsDir() {
		gctx, cancel := context.WithTimeoutCause(ctx, gitListTimeout, fmt.Errorf("git did not answer within %s (killed)", gitListTimeout))
		var inRepo bool
		listed, inRepo, err = gitcli.Files(gctx, from)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, "", context.Cause(ctx)
			}
			return nil, nil, "", s.fail(ClassSendFailed, err, "%s is in a git work tree, but listing its files failed: %v (send copies what git would commit: the tracked files and the untracked ones .gitignore leaves)", from, err)
		}
		if inRepo {
			repo = "; git work tree: tracked and not-ignored files"
			if listed == nil {
				listed = []string{}
			}
		}
	}
	files, t, err = walkLocal(from, excludes, newSelection(listed, skip...))
	if err != nil {
		return nil, nil, "", s.fail(ClassSendFailed, err, "reading %s: %v", from, err)
	}
	return files, t, repo, nil
}

// within returns dir relative to root (slash-separated) when dir lies
// strictly inside root, both resolved to real paths.
func within(root, dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	real := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p
	}
	rel, err := filepath.Rel(real(root), real(dir))
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// SendSize is what a send step copies, as `taoflow plan` shows it.
type SendSize struct {
	From  string `json:"from"` // with.from, resolved on this machine
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
	Links int64  `json:"links"`
	// Repo: from is in a git work tree, so only what git would commit
	// (tracked, and untracked not ignored) is sent.
	Repo bool `json:"git_work_tree"`
}

// SendSize lists what the send node of req would copy, on this machine
// only (git to list a work tree's files; nothing the plan names runs).
func (s *Steps) SendSize(ctx context.Context, req Request) (SendSize, error) {
	from, _, patterns, err := s.sendParams(req)
	if err != nil {
		return SendSize{}, err
	}
	excludes, err := excludeMatchers(patterns)
	if err != nil {
		return SendSize{}, err
	}
	_, t, repo, err := s.sendFiles(ctx, from, excludes)
	if err != nil {
		return SendSize{}, err
	}
	size := SendSize{From: from, Repo: repo != ""}
	size.Files, size.Bytes, size.Links = t.counts()
	return size, nil
}

// diskFull says "(the X disk is full)" when a tool's stderr says so.
func diskFull(stderr []byte, whose string) string {
	// GNU tar says "Wrote only N of M bytes" where the disk filled up.
	if strings.Contains(string(stderr), "No space left on device") || strings.Contains(string(stderr), "Wrote only") {
		return " (" + whose + " disk is full: free space there or choose another destination)"
	}
	return ""
}

// tarError is the first line of tar's stderr that says what went wrong
// (its last only says that something did).
func (s *Steps) tarError(stderr []byte) string {
	for _, l := range strings.Split(string(stderr), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "Exiting with failure status") {
			return s.redact.Clip(l, 300)
		}
	}
	return s.lastLine(stderr)
}

// sameLine reports whether send.sh said "@same": the destination already
// held the tree, and it read none of the archive.
func sameLine(out []byte) bool {
	return slices.Contains(strings.Split(string(out), "\n"), "@same")
}

// gotLine reads send.sh's "@got FILES BYTES LINKS".
func gotLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "@got" {
			return fmt.Sprintf("%s files (%s bytes) and %s symlinks", f[1], f[2], f[3])
		}
	}
	return "something else"
}

// listTree lists path on the instance with list.sh; nil when it does not
// exist.
func (s *Steps) listTree(ctx context.Context, inst platform.Instance, path string) (tree, error) {
	res, err := s.exec(ctx, inst, script(Params{"path": path}, "list"), nil)
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case err != nil:
		return nil, s.fail(ClassNotReachable, err, "listing %s on %s: %v", path, inst.Name, err)
	case res.ExitCode == exitNoPath:
		return nil, nil
	case res.ExitCode != 0:
		return nil, s.fail(ClassSendFailed, nil, "listing %s on %s failed (exit code %d): %s", path, inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	t, err := parseTree(res.Stdout, s.redact)
	if err != nil {
		return nil, s.fail(ClassSendFailed, err, "listing %s on %s: %v", path, inst.Name, err)
	}
	return t, nil
}

// execArchive runs script on inst with a tar archive of files on its
// stdin, the root named "d". A transport failure before the script ran is
// tried again with a fresh archive (as exec does). werr is what went wrong
// writing the archive (a file that vanished or changed size), if anything.
func (s *Steps) execArchive(ctx context.Context, inst platform.Instance, script string, files []localFile) (res platform.Result, werr, err error) {
	script = privatePrelude + script
	_, err = s.retryTransient(ctx, func() error {
		// An *os.File as stdin: the transport hands it to its process as
		// is, so the archive goes from this pipe straight to ssh (or the
		// local shell), with no copier in between.
		pr, pw, perr := os.Pipe()
		if perr != nil {
			return &platform.ExecError{Instance: inst.Name, Err: perr, Transient: true}
		}
		done := make(chan error, 1)
		go func() {
			err := writeArchive(pw, files)
			_ = pw.Close() // EOF for the script, or nothing more of a broken archive
			done <- err
		}()
		var err error
		res, err = s.cfg.Platform.Exec(ctx, inst, script, pr)
		_ = pr.Close() // a writer nobody reads gets EPIPE
		// The command has ended, but a copy of pr may live on (an ssh
		// master that has not yet closed the session's descriptors): a
		// writer still blocked in the pipe gets os.ErrClosed.
		_ = pw.Close()
		werr = <-done
		if errors.Is(werr, syscall.EPIPE) || errors.Is(werr, os.ErrClosed) {
			werr = nil // the reader went away: the script's result says why
		}
		res.Stdout, res.Stderr = dropCutLine(res.Stdout), dropCutLine(res.Stderr)
		return err
	})
	return res, werr, err
}

// testHookSent and testHookFetched, when set by a test, are called after
// each file written to a send's archive or extracted from a fetch's (to
// interrupt a transfer at a known point).
var testHookSent, testHookFetched func(rel string)

// spliceMin is the size from which a file's bytes go into the archive's
// pipe without passing through this process (splice(2) from the page
// cache, on Linux; Go's io.Copy splices only from sockets). Smaller files
// are copied through the archive's buffer, where many of them make one
// write.
const spliceMin = 1 << 20

// writeArchive writes files to w as a tar archive whose root is "d":
// symlinks as links, modification times in whole seconds, no owner
// names. Headers and small files go through a 1 MiB buffer; when w is an
// *os.File (a pipe), files of spliceMin bytes or more are spliced into it
// straight from their own file, with no copy in user space.
func writeArchive(w io.Writer, files []localFile) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	direct, _ := w.(*os.File)
	buf := make([]byte, 256<<10)
	for _, f := range files {
		hdr, err := archiveHeader(f)
		if err != nil {
			return err
		}
		if direct != nil && hdr.Typeflag == tar.TypeReg && hdr.Size >= spliceMin {
			if err := spliceEntry(tw, bw, direct, hdr, f.Abs); err != nil {
				return err
			}
		} else {
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("%s: %w", f.Abs, err)
			}
			if hdr.Typeflag != tar.TypeReg {
				continue
			}
			if err := copyFile(tw, f.Abs, hdr.Size, buf); err != nil {
				return err
			}
		}
		if testHookSent != nil {
			testHookSent(f.Rel)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// archiveHeader is f's tar header, named under "d".
func archiveHeader(f localFile) (*tar.Header, error) {
	hdr, err := tar.FileInfoHeader(f.Info, f.Link)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Abs, err)
	}
	hdr.Name = "d"
	if f.Rel != "" {
		hdr.Name += "/" + f.Rel
	}
	if f.Info.IsDir() {
		hdr.Name += "/"
	}
	// Whole seconds, as the listings compare them; the writer picks
	// USTAR, or PAX for long or non-ASCII names.
	hdr.ModTime = f.Info.ModTime().Truncate(time.Second)
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	hdr.Uname, hdr.Gname = "", ""
	hdr.Format = tar.FormatUnknown
	return hdr, nil
}

// spliceEntry writes one regular file's entry to the archive tw writes
// into bw (over the pipe out) with its bytes spliced into out: tw's
// previous entry is padded, the header blocks (written by a tar.Writer of
// their own, which is then dropped unfinished) and everything buffered go
// out first, then the file, then the padding to a whole block. tw itself
// never sees the entry; the archive it ends is still whole.
func spliceEntry(tw *tar.Writer, bw *bufio.Writer, out *os.File, hdr *tar.Header, path string) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := tar.NewWriter(bw).WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := copyFile(out, path, hdr.Size, nil); err != nil {
		return err
	}
	if pad := -hdr.Size & (blockSize - 1); pad > 0 {
		_, err := bw.Write(make([]byte, pad))
		return err
	}
	return nil
}

// blockSize is a tar archive's block.
const blockSize = 512

// copyFile writes the size bytes of the file at path to w through buf, or,
// with a nil buf, to the pipe out with splice(2) (see spliceFile; a file
// splice cannot read is copied); a file that grew or shrank since it was
// listed is an error.
func copyFile(w io.Writer, path string, size int64, buf []byte) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	var n int64
	if out, ok := w.(*os.File); ok && buf == nil {
		n, err = spliceFile(out, fh, size)
		if n == 0 && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS)) {
			n, err = io.Copy(out, io.LimitReader(fh, size))
		}
	} else {
		n, err = io.CopyBuffer(w, io.LimitReader(fh, size), buf)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n != size {
		return fmt.Errorf("%s changed size while it was sent (%d bytes, listed with %d)", path, n, size)
	}
	return nil
}
