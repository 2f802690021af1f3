package steps

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// fetchParams reads a fetch step's with: from (on the instance) and to
// (resolved on this machine).
func (s *Steps) fetchParams(req Request) (from, to string, err error) {
	from, to = withString(req.With, "from"), withString(req.With, "to")
	if from == "" || to == "" {
		return "", "", &Error{Class: ClassInvalidConfig, Msg: "fetch needs with.from and with.to"}
	}
	if err := confinedPaths(req, "from", "to"); err != nil {
		return "", "", err
	}
	to = s.localPath(to)
	if to == "/" || to == filepath.Clean(s.localPath(".")) {
		return "", "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q would replace the plan's directory or / itself: fetch replaces its destination, so name a directory under it (results/...)", withString(req.With, "to"))}
	}
	return from, to, nil
}

// fetch copies the directory with.from on the instance to with.to on this
// machine: a listing of the source first (when to already lists the same
// tree, nothing is copied), then one tar archive streamed over the
// transport's stdout, extracted into a temporary directory next to to,
// checked file by file against the listing, given its taoflow-run.json and
// renamed into place. Nothing is ever left half-written under to.
func (s *Steps) fetch(ctx context.Context, req Request) error {
	from, to, err := s.fetchParams(req)
	if err != nil {
		return err
	}
	inst := req.Instance
	st, ok := s.cfg.Platform.(platform.Streamer)
	if !ok {
		return s.fail(ClassUnsupported, nil, "the %s platform cannot stream files back", s.cfg.Platform.Kind())
	}
	remote, err := s.listTree(ctx, inst, from)
	if err != nil {
		return err
	}
	if remote == nil || remote[""].Type != 'd' {
		return s.fail(ClassFetchFailed, nil, "%s on %s is not a directory (did the job write its results there?)", from, inst.Name)
	}
	remote = remote.without(manifestName)
	files, bytes, links := remote.counts()

	if _, local, err := walkLocal(to, nil, nil); err == nil && local.without(manifestName).same(remote) {
		fmt.Fprintf(req.Log, "%s already holds %s of %s (%d files, %d bytes): nothing to fetch\n", to, from, inst.Name, files, bytes)
		return nil
	}

	fmt.Fprintf(req.Log, "fetching %s (%d files, %d bytes) from %s to %s\n", from, files, bytes, inst.Name, to)
	parent := filepath.Dir(to)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return s.fail(ClassFetchFailed, err, "cannot create %s on this machine: %v", parent, pathErr(err))
	}
	tmp, err := os.MkdirTemp(parent, ".taoflow-fetch-")
	if err != nil {
		return s.fail(ClassFetchFailed, err, "cannot write in %s on this machine: %v", parent, pathErr(err))
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return s.fail(ClassFetchFailed, err, "cannot write in %s on this machine: %v", parent, pathErr(err))
	}

	got, sums, res, xerr, err := s.streamInto(ctx, st, inst, from, dir)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case xerr != nil:
		return s.fail(ClassFetchFailed, xerr, "writing what came from %s on %s%s: %v (%s was left as it was)", from, inst.Name, localDiskFull(xerr), pathErr(xerr), to)
	case err != nil:
		return s.fail(ClassFetchFailed, err, "fetching %s from %s: %v", from, inst.Name, err)
	case res.ExitCode == exitNoPath:
		return s.fail(ClassFetchFailed, nil, "%s on %s is not a directory any more", from, inst.Name)
	case res.ExitCode != 0:
		return s.fail(ClassFetchFailed, nil, "archiving %s on %s failed (exit code %d): %s", from, inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	got = got.without(manifestName)
	gf, gb, gl := got.counts()
	if diff := firstDifference(remote.sizes(), got.sizes()); diff != "" || gl != links {
		if diff == "" {
			diff = fmt.Sprintf("%d symlinks, want %d", gl, links)
		}
		return s.fail(ClassMismatch, nil, "%s on %s holds %d files (%d bytes) but the copy holds %d files (%d bytes): %s (%s was left as it was)", from, inst.Name, files, bytes, gf, gb, diff, to)
	}

	m := s.manifest(req, from, to, gf, gb)
	delete(sums, manifestName)
	m.SHA256 = sums
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return s.fail(ClassFetchFailed, err, "manifest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifestName), append(s.redact.RedactBytes(body), '\n'), 0o644); err != nil {
		return s.fail(ClassFetchFailed, err, "writing %s%s: %v (%s was left as it was)", manifestName, localDiskFull(err), pathErr(err), to)
	}
	if err := replace(dir, to, filepath.Join(tmp, "old")); err != nil {
		return s.fail(ClassFetchFailed, err, "%v", err)
	}
	fmt.Fprintf(req.Log, "fetched %d files (%d bytes) and %d symlinks to %s; verified; wrote %s\n", gf, gb, gl, to, manifestName)
	return nil
}

// replace renames dir to dst, moving what dst was to old first (old is
// inside the temporary directory the caller removes).
func replace(dir, dst, old string) error {
	if _, err := os.Lstat(dst); err == nil {
		if err := os.Rename(dst, old); err != nil {
			return fmt.Errorf("cannot replace %s: %w", dst, pathErr(err))
		}
	}
	if err := os.Rename(dir, dst); err != nil {
		_ = os.Rename(old, dst)
		return fmt.Errorf("cannot rename the copy to %s: %w", dst, pathErr(err))
	}
	return nil
}

// pathErr is err without the path an *fs.PathError repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// localDiskFull says "(this machine's disk is full ...)" for ENOSPC.
func localDiskFull(err error) string {
	if err != nil && strings.Contains(err.Error(), "no space left on device") {
		return " (this machine's disk is full: free space there or choose another with.to)"
	}
	return ""
}

// streamInto runs fetch.sh for from on inst and extracts the archive it
// writes into dir as it comes. It returns the tree extracted and each
// file's sha256; xerr is what went wrong extracting (then the remote
// command is stopped).
func (s *Steps) streamInto(ctx context.Context, st platform.Streamer, inst platform.Instance, from, dir string) (got tree, sums map[string]string, res platform.Result, xerr, err error) {
	sc := privatePrelude + script(Params{"src": from}, "fetch")
	wait := s.cfg.TransientBackoff
	for try := 1; ; try++ {
		runCtx, stop := context.WithCancelCause(ctx)
		// An *os.File as the command's stdout: the transport writes into
		// it directly, with no copying goroutine in between.
		pr, pw, perr := os.Pipe()
		if perr != nil {
			stop(nil)
			return nil, nil, res, nil, perr
		}
		type extracted struct {
			t    tree
			sums map[string]string
			err  error
		}
		done := make(chan extracted, 1)
		go func() {
			defer pr.Close()
			t, sums, err := extract(bufio.NewReaderSize(pr, 1<<20), dir)
			if err != nil {
				stop(err) // stop the remote tar, which nobody reads now
			}
			_, _ = io.Copy(io.Discard, pr) // tar's trailing blocks
			done <- extracted{t, sums, err}
		}()
		res, err = st.ExecStream(runCtx, inst, sc, nil, pw)
		_ = pw.Close()
		x := <-done
		stop(nil)
		res.Stderr = dropCutLine(res.Stderr)
		if x.err != nil {
			return nil, nil, res, x.err, nil
		}
		if err != nil && ctx.Err() != nil {
			return nil, nil, res, nil, context.Cause(ctx)
		}
		var ee *platform.ExecError
		if err == nil || !errors.As(err, &ee) || !ee.Transient || try == transientTries {
			return x.t, x.sums, res, nil, err
		}
		if !sleep(ctx, wait) {
			return nil, nil, res, nil, context.Cause(ctx)
		}
		wait *= 2
		_ = os.RemoveAll(dir)
		_ = os.Mkdir(dir, 0o755)
	}
}

// extract reads a tar archive (fetch.sh's: entries under ".") into dir,
// through an os.Root, so that no entry, and no symlink it made, can write
// outside dir. It returns what it extracted and every file's sha256.
func extract(r io.Reader, dir string) (tree, map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	t := tree{"": {Type: 'd'}}
	sums := map[string]string{}
	tr := tar.NewReader(r)
	type stamp struct {
		name string
		at   time.Time
	}
	var dirs []stamp
	buf := make([]byte, 1<<20)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the archive: %w", err)
		}
		name := path.Clean(hdr.Name)
		if name == "." {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, nil, fmt.Errorf("the archive holds an unsafe name %q", hdr.Name)
		}
		name = strings.TrimPrefix(name, "./")
		if _, dup := t[name]; dup {
			return nil, nil, fmt.Errorf("the archive holds %q twice", name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, nil, err
			}
			_ = root.Chmod(name, mode|0o700)
			dirs = append(dirs, stamp{name, hdr.ModTime})
			t[name] = entry{Type: 'd'}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return nil, nil, err
			}
			h := sha256.New()
			n, err := io.CopyBuffer(io.MultiWriter(f, h), tr, buf)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
			t[name] = entry{Type: 'f', Size: n, MTime: hdr.ModTime.Unix()}
			sums[name] = hex.EncodeToString(h.Sum(nil))
			if testHookFetched != nil {
				testHookFetched(name)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return nil, nil, err
			}
			t[name] = entry{Type: 'l', Size: int64(len(hdr.Linkname))}
		case tar.TypeLink:
			// A second name of a file archived before: a copy of it.
			target := strings.TrimPrefix(path.Clean(hdr.Linkname), "./")
			e, ok := t[target]
			if !ok || e.Type != 'f' {
				return nil, nil, fmt.Errorf("the archive links %q to %q, which it does not hold", name, hdr.Linkname)
			}
			if err := copyWithin(root, target, name); err != nil {
				return nil, nil, err
			}
			t[name], sums[name] = e, sums[target]
		default:
			// devices, fifos: results are files, dirs and links
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].at, dirs[i].at)
	}
	return t, sums, nil
}

// copyWithin copies the file src of root to a new file dst.
func copyWithin(root *os.Root, src, dst string) error {
	in, err := root.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return root.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
