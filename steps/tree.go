package steps

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/secret"
)

// entry is one thing in a tree send or fetch copies, as a listing shows
// it: its type ('f' a regular file, 'd' a directory, 'l' a symlink), its
// size (a symlink's is the length of its target) and its modification
// time in whole seconds.
type entry struct {
	Type  byte
	Size  int64
	MTime int64
}

// tree is a listing of a copied tree by path relative to its root ("" is
// the root itself). Only files, directories and symlinks are in it: what
// else a tree holds (sockets, fifos, devices) is not copied.
type tree map[string]entry

// same reports whether t and o list the same tree: the same paths, each of
// the same type; files of the same size and modification time, links of
// the same size. A directory's size and time do not count.
func (t tree) same(o tree) bool {
	if len(t) != len(o) {
		return false
	}
	for p, a := range t {
		b, ok := o[p]
		if !ok || a.Type != b.Type {
			return false
		}
		switch a.Type {
		case 'f':
			if a.Size != b.Size || a.MTime != b.MTime {
				return false
			}
		case 'l':
			if a.Size != b.Size {
				return false
			}
		}
	}
	return true
}

// digest is the sha256 (hex) of t as send.sh digests a destination's
// listing: one NUL-ended record per entry, "d PATH", "f SIZE MTIME PATH"
// (whole seconds) or "l SIZE PATH", sorted bytewise. Two trees that
// same calls the same have the same digest.
func (t tree) digest() string {
	recs := make([]string, 0, len(t))
	for p, e := range t {
		switch e.Type {
		case 'd':
			recs = append(recs, "d "+p)
		case 'f':
			recs = append(recs, fmt.Sprintf("f %d %d %s", e.Size, e.MTime, p))
		case 'l':
			recs = append(recs, fmt.Sprintf("l %d %s", e.Size, p))
		}
	}
	slices.Sort(recs)
	h := sha256.New()
	for _, r := range recs {
		h.Write([]byte(r))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// counts returns t's regular files, their bytes, and its symlinks.
func (t tree) counts() (files, bytes, links int64) {
	for _, e := range t {
		switch e.Type {
		case 'f':
			files++
			bytes += e.Size
		case 'l':
			links++
		}
	}
	return files, bytes, links
}

// sizes returns t's regular files by path with their sizes (for
// firstDifference).
func (t tree) sizes() map[string]int64 {
	out := map[string]int64{}
	for p, e := range t {
		if e.Type == 'f' {
			out[p] = e.Size
		}
	}
	return out
}

// without returns t less the path p.
func (t tree) without(p string) tree {
	if _, ok := t[p]; !ok {
		return t
	}
	out := make(tree, len(t))
	for k, v := range t {
		if k != p {
			out[k] = v
		}
	}
	return out
}

// parseTree reads list.sh's records ("TYPE SIZE MTIME PATH\0").
func parseTree(out []byte, red *secret.Redactor) (tree, error) {
	t := tree{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		f := strings.SplitN(string(rec), " ", 4)
		if len(f) != 4 || len(f[0]) != 1 {
			return nil, fmt.Errorf("unreadable listing record %q", clipRecord(rec, red))
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("unreadable size in listing record %q", clipRecord(rec, red))
		}
		mt, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("unreadable time in listing record %q", clipRecord(rec, red))
		}
		switch ty := f[0][0]; ty {
		case 'f', 'd', 'l':
			t[f[3]] = entry{Type: ty, Size: size, MTime: int64(math.Floor(mt))}
		}
	}
	if _, ok := t[""]; !ok {
		return nil, fmt.Errorf("the listing does not show its root")
	}
	return t, nil
}

// clipRecord is the start of a listing record for an error message,
// redacted before it is clipped (a file name may hold anything).
func clipRecord(b []byte, red *secret.Redactor) string {
	return red.Clip(string(b), 80)
}

// localFile is one entry of a tree on this machine, with where it is.
type localFile struct {
	Rel  string // slash-separated, "" for the root
	Abs  string
	Info fs.FileInfo
	Link string // a symlink's target
}

// selection narrows what walkLocal lists under its root: paths (slash-
// separated, relative to the root) and directories that are never listed,
// and, when files is not nil, the only files that are (a git work tree's,
// gitcli.Files).
type selection struct {
	// skip are directories left out with all under them (taoflow's state
	// directory).
	skip map[string]bool
	// files, when not nil, are the only paths listed, with dirs, their
	// parent directories. A directory in files (a submodule) is listed
	// with all under it.
	files, dirs map[string]bool
}

// newSelection makes the selection of files (nil: every file) less skip.
func newSelection(files []string, skip ...string) *selection {
	sel := &selection{skip: map[string]bool{}}
	for _, p := range skip {
		sel.skip[p] = true
	}
	if files == nil {
		return sel
	}
	sel.files, sel.dirs = make(map[string]bool, len(files)), map[string]bool{}
	for _, f := range files {
		// A nested repository git does not track is listed as "dir/":
		// one entry, as a submodule is.
		f = strings.TrimSuffix(f, "/")
		sel.files[f] = true
		for d := path.Dir(f); d != "." && !sel.dirs[d]; d = path.Dir(d) {
			sel.dirs[d] = true
		}
	}
	return sel
}

// keeps reports whether the entry rel (a directory when dir) is listed:
// with a nil sel, everything; otherwise never an entry named .git (a
// repository's own database, or a submodule's pointer to it).
func (sel *selection) keeps(rel string, dir bool) bool {
	if sel == nil {
		return true
	}
	if path.Base(rel) == ".git" || sel.skip[rel] {
		return false
	}
	if sel.files == nil || sel.files[rel] || (dir && sel.dirs[rel]) {
		return true
	}
	// Under a submodule, which git lists as one entry.
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if sel.files[d] {
			return true
		}
	}
	return false
}

// walkLocal lists the tree at root on this machine (root itself followed
// if it is a symlink; nothing under it is), in walk order, leaving out
// what an exclude pattern matches (a directory with all under it), what
// sel leaves out, any .git, and what is neither a file, a directory nor a
// symlink. It returns the listing too.
func walkLocal(root string, excludes []*regexp.Regexp, sel *selection) ([]localFile, tree, error) {
	root = filepath.Clean(root)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, nil, err
	}
	t := tree{}
	var files []localFile
	add := func(rel, abs string, info fs.FileInfo) error {
		e := entry{MTime: info.ModTime().Unix()}
		lf := localFile{Rel: rel, Abs: abs, Info: info}
		switch {
		case info.Mode().IsRegular():
			e.Type, e.Size = 'f', info.Size()
		case info.IsDir():
			e.Type = 'd'
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(abs)
			if err != nil {
				return err
			}
			e.Type, e.Size, lf.Link = 'l', int64(len(target)), target
		default:
			return nil
		}
		t[rel] = e
		files = append(files, lf)
		return nil
	}
	if err := add("", root, fi); err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return files, t, nil
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel := filepath.ToSlash(p[len(root)+1:])
		if !sel.keeps(rel, d.IsDir()) || slices.ContainsFunc(excludes, func(re *regexp.Regexp) bool { return re.MatchString(rel) }) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return add(rel, p, info)
	})
	if err != nil {
		return nil, nil, err
	}
	return files, t, nil
}

// excludeMatchers compiles with.exclude.
func excludeMatchers(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range patterns {
		re, err := fnmatchRE(p)
		if err != nil {
			return nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.exclude: %q: %v", p, err)}
		}
		out = append(out, re)
	}
	return out, nil
}
