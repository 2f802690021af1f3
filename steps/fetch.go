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
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/plan"
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
	text := to
	to = s.localPath(to)
	dirs := plan.LocalDirs{Plan: filepath.Clean(s.localPath(".")), State: s.cfg.StateDir}.HomeDirs()
	if err := plan.CheckFetchTo(text, to, dirs); err != nil {
		return "", "", &Error{Class: ClassInvalidConfig, Msg: err.Error()}
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
	if err := mayReplace(req, to); err != nil {
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

	if _, local, err := walkLocal(to, nil, nil); err == nil && withLinksLeftOut(local, to).without(manifestName).same(remote) {
		fmt.Fprintf(req.Log, "%s already holds %s of %s (%d files, %d bytes): nothing to fetch\n", to, from, inst.Name, files, bytes)
		recordFetched(req, to)
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

	x, res, xerr, err := s.streamInto(ctx, st, inst, from, dir)
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
	got := x.t.without(manifestName)
	gf, gb, gl := got.counts()
	if diff := firstDifference(remote.sizes(), got.sizes()); diff != "" || gl+int64(len(x.leftOut)) != links {
		if diff == "" {
			diff = fmt.Sprintf("%d symlinks, want %d", gl, links)
		}
		return s.fail(ClassMismatch, nil, "%s on %s holds %d files (%d bytes) but the copy holds %d files (%d bytes): %s (%s was left as it was)", from, inst.Name, files, bytes, gf, gb, diff, to)
	}

	m := s.manifest(req, from, to, gf, gb)
	delete(x.sums, manifestName)
	m.SHA256 = x.sums
	if len(x.leftOut) > 0 {
		m.LinksLeftOut = x.leftOut
		names := slices.Sorted(maps.Keys(x.leftOut))
		fmt.Fprintf(req.Log, "left out %d symlinks pointing outside %s (fetch makes no link that leaves the fetched tree; they are listed in %s): %s\n", len(names), from, manifestName, strings.Join(names, ", "))
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return s.fail(ClassFetchFailed, err, "manifest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifestName), append(s.redact.RedactBytes(body), '\n'), 0o644); err != nil {
		return s.fail(ClassFetchFailed, err, "writing %s%s: %v (%s was left as it was)", manifestName, localDiskFull(err), pathErr(err), to)
	}
	if err := mayReplace(req, to); err != nil {
		return err // something came to stand at to while the copy was made
	}
	if err := replace(dir, to, filepath.Join(tmp, "old")); err != nil {
		return s.fail(ClassFetchFailed, err, "%v", err)
	}
	fmt.Fprintf(req.Log, "fetched %d files (%d bytes) and %d symlinks to %s; verified; wrote %s\n", gf, gb, gl, to, manifestName)
	recordFetched(req, to)
	return nil
}

// RecordFetchedTo is the Request.Record key under which a fetch records
// the absolute local directory that holds the results it copied, for the
// results table (docs/design.md §7.3).
const RecordFetchedTo = "fetched_to"

func recordFetched(req Request, to string) {
	if req.Record == nil {
		return
	}
	if abs, err := filepath.Abs(to); err == nil {
		to = abs
	}
	req.Record(RecordFetchedTo, to)
}

// mayReplace refuses to replace what stands at to unless fetch wrote it
// (a directory holding its taoflow-run.json), it is an empty directory, or
// the step says replace: true: fetch moves its destination aside and
// removes it, and a to naming a directory of the user's would delete it.
func mayReplace(req Request, to string) error {
	yes, _, err := withBool(req.With, "replace")
	if err != nil || yes {
		return err
	}
	fi, err := os.Lstat(to)
	if err != nil {
		return nil // nothing there (or nothing we can see: the rename says)
	}
	what := "a file"
	switch {
	case fi.IsDir():
		if m, err := os.Lstat(filepath.Join(to, manifestName)); err == nil && m.Mode().IsRegular() {
			return nil // an earlier fetch's (or upload's) copy
		}
		d, err := os.Open(to)
		if err != nil {
			return &Error{Class: ClassFetchFailed, Msg: fmt.Sprintf("cannot read %s on this machine: %v", to, pathErr(err))}
		}
		names, _ := d.Readdirnames(1)
		_ = d.Close()
		if len(names) == 0 {
			return nil
		}
		what = "a directory with files that no fetch wrote (it has no " + manifestName + ")"
	case fi.Mode()&fs.ModeSymlink != 0:
		what = "a symlink"
	}
	return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %s is %s: fetch replaces its destination, which would delete what is there; name a new directory, or set replace: true on the step to have it replaced", to, what)}
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

// extracted is what extract wrote: the tree, each file's sha256, and the
// symlinks it left out (by path, with their targets).
type extracted struct {
	t       tree
	sums    map[string]string
	leftOut map[string]string
}

// streamInto runs fetch.sh for from on inst and extracts the archive it
// writes into dir as it comes. It returns what was extracted; xerr is what
// went wrong extracting (then the remote command is stopped).
func (s *Steps) streamInto(ctx context.Context, st platform.Streamer, inst platform.Instance, from, dir string) (x extracted, res platform.Result, xerr, err error) {
	sc := privatePrelude + script(Params{"src": from}, "fetch")
	umask := processUmask()
	first := true
	_, err = s.retryTransient(ctx, func() error {
		if !first {
			// What a try that failed in transport left is not kept.
			_ = os.RemoveAll(dir)
			_ = os.Mkdir(dir, 0o755)
		}
		first = false
		runCtx, stop := context.WithCancelCause(ctx)
		// An *os.File as the command's stdout: the transport writes into
		// it directly, with no copying goroutine in between.
		pr, pw, perr := os.Pipe()
		if perr != nil {
			stop(nil)
			return perr
		}
		type result struct {
			x   extracted
			err error
		}
		done := make(chan result, 1)
		go func() {
			defer pr.Close()
			x, err := extract(bufio.NewReaderSize(pr, 1<<20), dir, umask)
			if err != nil {
				stop(err) // stop the remote tar, which nobody reads now
			}
			_, _ = io.Copy(io.Discard, pr) // tar's trailing blocks
			done <- result{x, err}
		}()
		var err error
		res, err = st.ExecStream(runCtx, inst, sc, nil, pw)
		_ = pw.Close()
		r := <-done
		stop(nil)
		res.Stderr = dropCutLine(res.Stderr)
		if r.err != nil {
			xerr = r.err // not a transport failure: no second try
			return nil
		}
		x = r.x
		return err
	})
	if xerr != nil || (err != nil && ctx.Err() != nil) {
		return extracted{}, res, xerr, err
	}
	return x, res, nil, err
}

// extract reads a tar archive (fetch.sh's: entries under ".") into dir,
// through an os.Root, so that no entry, and no symlink it made, can write
// outside dir. Directories and files are created with their archived
// permissions (and the owner's rwx on directories, rw on files) less
// umask, as any program's are. A symlink whose target leaves the tree
// (absolute, or climbing above it, directly or through other links of the
// archive) is left out: it would point whoever reads the copy at a file
// of this machine the results do not hold. It returns what it extracted.
func extract(r io.Reader, dir string, umask fs.FileMode) (extracted, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return extracted{}, err
	}
	defer root.Close()
	t := tree{"": {Type: 'd'}}
	sums := map[string]string{}
	links := map[string]string{}
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
			return extracted{}, fmt.Errorf("reading the archive: %w", err)
		}
		name := path.Clean(hdr.Name)
		if name == "." {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return extracted{}, fmt.Errorf("the archive holds an unsafe name %q", hdr.Name)
		}
		name = strings.TrimPrefix(name, "./")
		if _, dup := t[name]; dup {
			return extracted{}, fmt.Errorf("the archive holds %q twice", name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(path.Dir(name), 0o700); err != nil {
				return extracted{}, err
			}
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return extracted{}, err // (one made as a parent before is fine)
			}
			// Mkdir's mode is cut by the umask too; Chmod sets it whole.
			if err := root.Chmod(name, (mode|0o700)&^umask); err != nil {
				return extracted{}, err
			}
			dirs = append(dirs, stamp{name, hdr.ModTime})
			t[name] = entry{Type: 'd'}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return extracted{}, err
			}
			h := sha256.New()
			n, err := io.CopyBuffer(io.MultiWriter(f, h), tr, buf)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return extracted{}, fmt.Errorf("%s: %w", name, err)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
			t[name] = entry{Type: 'f', Size: n, MTime: hdr.ModTime.Unix()}
			sums[name] = hex.EncodeToString(h.Sum(nil))
			if testHookFetched != nil {
				testHookFetched(name)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return extracted{}, err
			}
			t[name] = entry{Type: 'l', Size: int64(len(hdr.Linkname))}
			links[name] = hdr.Linkname
		case tar.TypeLink:
			// A second name of a file archived before: a copy of it.
			target := strings.TrimPrefix(path.Clean(hdr.Linkname), "./")
			e, ok := t[target]
			if !ok || e.Type != 'f' {
				return extracted{}, fmt.Errorf("the archive links %q to %q, which it does not hold", name, hdr.Linkname)
			}
			if err := copyWithin(root, target, name); err != nil {
				return extracted{}, err
			}
			t[name], sums[name] = e, sums[target]
		default:
			// devices, fifos: results are files, dirs and links
		}
	}
	// Links are judged once all are in: one may lead through another
	// that comes later in the archive.
	var leftOut map[string]string
	for name, target := range links {
		if linkStaysInside(links, name) {
			continue
		}
		if err := root.Remove(name); err != nil {
			return extracted{}, err
		}
		delete(t, name)
		if leftOut == nil {
			leftOut = map[string]string{}
		}
		leftOut[name] = target
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].at, dirs[i].at)
	}
	return extracted{t: t, sums: sums, leftOut: leftOut}, nil
}

// linkStaysInside reports whether the symlink name (slash-separated,
// relative to the tree's root) resolves inside the tree: its target is
// followed segment by segment from the link's directory, through the
// other links of the tree, and must never be absolute nor climb above the
// root. A loop counts as leaving (no one can read it anyway).
func linkStaysInside(links map[string]string, name string) bool {
	var cur []string
	if d := path.Dir(name); d != "." {
		cur = strings.Split(d, "/")
	}
	todo := strings.Split(links[name], "/")
	if path.IsAbs(links[name]) {
		return false
	}
	for hops := 0; len(todo) > 0; {
		seg := todo[0]
		todo = todo[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		at := strings.Join(append(slices.Clone(cur), seg), "/")
		target, isLink := links[at]
		if !isLink {
			cur = append(cur, seg)
			continue
		}
		if hops++; hops > 40 || path.IsAbs(target) {
			return false
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return true
}

// withLinksLeftOut is the local listing t of the fetched copy at to with
// the links its manifest says fetch left out put back, as the instance
// lists them: a copy that lacks only those holds the same tree.
func withLinksLeftOut(t tree, to string) tree {
	b, err := os.ReadFile(filepath.Join(to, manifestName))
	if err != nil {
		return t
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil || len(m.LinksLeftOut) == 0 {
		return t
	}
	out := maps.Clone(t)
	for name, target := range m.LinksLeftOut {
		if _, ok := out[name]; !ok {
			out[name] = entry{Type: 'l', Size: int64(len(target))}
		}
	}
	return out
}

// processUmask is this process's umask, read from /proc (setting it to
// read it back would change it for every thread meanwhile); 022 when it
// cannot be read.
func processUmask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n).Perm()
				}
			}
		}
	}
	return 0o022
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
