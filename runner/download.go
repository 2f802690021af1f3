package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// Download is one upload brought back by DownloadResults.
type Download struct {
	Node  string // the upload node
	Cell  string
	From  string // where the manifest says the results went
	To    string // the local directory
	Files int64
	Bytes int64
	// Checked says how the copy was verified: "sha256" (every file's
	// checksum), or "size" (a manifest without checksums).
	Checked string
	Err     error
}

// manifestFile is the manifest's name next to uploaded results.
const manifestFile = "taoflow-run.json"

// DownloadOptions say what DownloadResults brings back, and where to.
type DownloadOptions struct {
	// Cells, when given, picks the cells.
	Cells []string
	// Dir is the directory the copies land in (made when missing). It must
	// be this user's alone to write: another user could plant links in it.
	Dir string
	// EndpointURLs are the S3 endpoints the user confirmed
	// (--endpoint-url): an upload whose recorded endpoint_url is not one
	// of them is not downloaded, since the AWS CLI would send the user's
	// signed requests to a host that only the state names.
	EndpointURLs []string
}

// safeName is the grammar every id DownloadResults makes a path of must
// keep (cell ids, step ids and instance names all do): a state from
// elsewhere must not name "../../.bashrc".
var safeName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$`)

// DownloadResults copies the results the uploads of run put (s3:// with the
// local AWS CLI and the endpoint and region the upload used, or file://)
// into DIR/CELL/STEP (DIR/@INSTANCE/STEP without a matrix) and verifies
// each copy against its taoflow-run.json: the file count and bytes, and
// every file's sha256 where the manifest has them. A copy that does not
// match is an error of its own Download; the others go on.
//
// The state may come from elsewhere, so nothing it says steers a write or
// a request unchecked: the ids that name the copy's directory must keep
// safeName's grammar, every write goes through an os.Root of DIR (each
// copy is made in a fresh private directory there, then renamed into
// place; what stands at DIR/CELL/STEP is replaced only when it is an
// earlier download, holding its taoflow-run.json), and an s3:// upload
// with an endpoint_url is downloaded only when the user confirmed that
// endpoint (opts.EndpointURLs): otherwise an *EndpointError, before
// anything is copied.
func DownloadResults(ctx context.Context, store *state.Store, runID string, opts DownloadOptions) ([]Download, error) {
	nodes, err := store.Nodes(ctx, runID)
	if err != nil {
		return nil, err
	}
	type job struct {
		d     Download
		facts map[string]string
		rel   string
	}
	var jobs []job
	found := map[string]bool{}
	unconfirmed := map[string][]string{}
	for _, n := range nodes {
		from := n.Facts[factUploadURL]
		if from == "" || n.State != string(engine.Succeeded) {
			continue
		}
		if len(opts.Cells) > 0 && !slices.Contains(opts.Cells, n.Cell) {
			continue
		}
		found[n.Cell] = true
		where, name := n.Cell, n.Cell
		if where == "" {
			where, name = "@"+n.Instance, n.Instance
		}
		j := job{d: Download{Node: n.ID, Cell: n.Cell, From: from, To: filepath.Join(opts.Dir, where, n.Step)}, facts: n.Facts, rel: filepath.Join(where, n.Step)}
		if !safeName.MatchString(name) || !safeName.MatchString(n.Step) {
			j.d.Err = fmt.Errorf("the state names its cell, instance or step %q/%q, which is not an id taoflow makes: not downloaded (a state from elsewhere?)", name, n.Step)
		} else if e := n.Facts[factEndpointURL]; strings.HasPrefix(from, "s3://") && e != "" && !slices.Contains(opts.EndpointURLs, e) {
			unconfirmed[e] = append(unconfirmed[e], n.ID)
		}
		jobs = append(jobs, j)
	}
	for _, c := range opts.Cells {
		if !found[c] {
			return nil, fmt.Errorf("run %s has no uploaded results for cell %q", runID, c)
		}
	}
	if len(unconfirmed) > 0 {
		return nil, &EndpointError{Run: runID, Nodes: unconfirmed}
	}
	root, err := openDownloadDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := make([]Download, 0, len(jobs))
	for _, j := range jobs {
		if j.d.Err == nil {
			j.d.Files, j.d.Bytes, j.d.Checked, j.d.Err = fetchInto(ctx, root, opts.Dir, j.rel, j.facts, j.d.From)
		}
		out = append(out, j.d)
	}
	return out, nil
}

// RecordDownloads records on each upload node of ds that came back without
// error where its copy now lies (the node fact downloaded_to, an absolute
// directory), so that the results table, status --json and the web UI
// list it beside the upload's URL; a later download of the same upload
// replaces it. store must be open for writing.
func RecordDownloads(ctx context.Context, store *state.Store, runID string, ds []Download) error {
	var errs []error
	for _, d := range ds {
		if d.Err != nil {
			continue
		}
		to, err := filepath.Abs(d.To)
		if err == nil {
			err = store.SetNodeFact(ctx, runID, d.Node, factDownloadedTo, to)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// EndpointError refuses a download whose S3 endpoints the user did not
// confirm.
type EndpointError struct {
	Run   string
	Nodes map[string][]string // the upload nodes, by endpoint
}

func (e *EndpointError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the state says the uploads of run %s went to ", e.Run)
	var confirm []string
	for i, ep := range slices.Sorted(maps.Keys(e.Nodes)) {
		if i > 0 {
			b.WriteString(", and ")
		}
		fmt.Fprintf(&b, "the S3 endpoint %s (%s)", ep, strings.Join(e.Nodes[ep], ", "))
		confirm = append(confirm, "--endpoint-url "+ep)
	}
	fmt.Fprintf(&b, ": the AWS CLI would send requests signed with this environment's AWS credentials there, and a state from elsewhere can name any host. If it is yours, confirm it: %s", strings.Join(confirm, " "))
	return b.String()
}

// openDownloadDir makes dir when it is missing (private), refuses one that
// is not this user's alone to write (another user could plant links in
// it), and opens it as an os.Root.
func openDownloadDir(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if why := state.NotPrivate(fi, os.Geteuid()); why != "" {
		return nil, fmt.Errorf("refusing to download into %s: it is %s, so someone else could plant links in it that make taoflow write elsewhere; download into a directory of your own (or chmod go-w it)", dir, why)
	}
	return os.OpenRoot(dir)
}

// fetchInto copies from into rel under root (at dir on disk): into a fresh
// private directory beside rel, checked against its manifest, then renamed
// to rel, moving aside an earlier download there (one holding its
// taoflow-run.json, or an empty directory); anything else at rel is left
// as it was and is an error. A copy that does not match its manifest is
// still put in place, to look at, and its error returned.
func fetchInto(ctx context.Context, root *os.Root, dir, rel string, facts map[string]string, from string) (files, size int64, checked string, err error) {
	parent := filepath.Dir(rel)
	if err := root.MkdirAll(parent, 0o755); err != nil {
		return 0, 0, "", err
	}
	if err := replaceable(root, rel); err != nil {
		return 0, 0, "", err
	}
	tmp, err := mkdirTempIn(root, parent)
	if err != nil {
		return 0, 0, "", err
	}
	defer func() { _ = root.RemoveAll(tmp) }()
	copyRel := filepath.Join(tmp, "d")
	if err := root.Mkdir(copyRel, 0o700); err != nil {
		return 0, 0, "", err
	}
	if p, ok := strings.CutPrefix(from, "file://"); ok {
		croot, err := root.OpenRoot(copyRel)
		if err != nil {
			return 0, 0, "", err
		}
		err = copyTree(p, croot)
		_ = croot.Close()
		if err != nil {
			return 0, 0, "", err
		}
	} else if err := s3Sync(ctx, facts, from, filepath.Join(dir, copyRel)); err != nil {
		return 0, 0, "", err
	}
	files, size, checked, verr := verify(filepath.Join(dir, copyRel))
	if _, err := root.Lstat(rel); err == nil {
		if err := root.Rename(rel, filepath.Join(tmp, "old")); err != nil {
			return files, size, checked, err
		}
	}
	if err := root.Rename(copyRel, rel); err != nil {
		return files, size, checked, err
	}
	return files, size, checked, verr
}

// replaceable refuses rel under root unless it is missing, an empty
// directory, or an earlier download (a directory holding its
// taoflow-run.json).
func replaceable(root *os.Root, rel string) error {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if m, err := root.Lstat(filepath.Join(rel, manifestFile)); err == nil && m.Mode().IsRegular() {
			return nil
		}
		d, err := root.Open(rel)
		if err != nil {
			return err
		}
		names, _ := d.Readdirnames(1)
		_ = d.Close()
		if len(names) == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s exists and is not an earlier download (it holds no %s): remove it, or download into another directory", rel, manifestFile)
}

// mkdirTempIn makes a new private directory .taoflow-download-* in parent
// under root and returns its path relative to root.
func mkdirTempIn(root *os.Root, parent string) (string, error) {
	for range 100 {
		name := filepath.Join(parent, fmt.Sprintf(".taoflow-download-%d-%d", os.Getpid(), rand.Uint64()))
		err := root.Mkdir(name, 0o700)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("cannot make a temporary directory for the download")
}

// s3Sync copies the s3:// URL from into the directory to with the AWS CLI.
func s3Sync(ctx context.Context, facts map[string]string, from, to string) error {
	if !strings.HasPrefix(from, "s3://") {
		return fmt.Errorf("%s: not an s3:// or file:// destination", from)
	}
	src := strings.TrimSuffix(from, "/") + "/"
	args := []string{"s3", "sync", src, to, "--only-show-errors", "--no-progress"}
	if v := facts[factEndpointURL]; v != "" {
		args = append(args, "--endpoint-url", v)
	}
	if v := facts[factRegion]; v != "" {
		args = append(args, "--region", v)
	}
	ctx, cancel := context.WithTimeout(ctx, 6*time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, "aws", args...)
	cmd.Env = append(os.Environ(), "AWS_PAGER=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return errors.New("the AWS CLI (aws) is not installed here")
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("aws s3 sync %s: %w: %s", src, err, msg)
	}
	return nil
}

// copyTree copies the regular files and directories under src into dst,
// each file created anew (O_EXCL) through the os.Root dst; symbolic links
// are not followed, nor copied.
func copyTree(src string, dst *os.Root) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
			return nil
		case e.IsDir():
			return dst.Mkdir(rel, 0o755)
		case !e.Type().IsRegular():
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := dst.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// verify checks the copy in dir against the manifest there.
func verify(dir string) (files, size int64, checked string, err error) {
	body, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return 0, 0, "", fmt.Errorf("no %s in the download: %w", manifestFile, err)
	}
	var m steps.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, 0, "", fmt.Errorf("%s: %w", manifestFile, err)
	}
	got := map[string]string{}
	sizes := map[string]int64{}
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == manifestFile {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		sizes[rel] = info.Size()
		files++
		size += info.Size()
		if m.SHA256 != nil {
			sum, err := fileSHA256(path)
			if err != nil {
				return err
			}
			got[rel] = sum
		}
		return nil
	})
	if err != nil {
		return files, size, "", err
	}
	if m.SHA256 == nil {
		if files != m.Files || size != m.Bytes {
			return files, size, "size", fmt.Errorf("the download holds %d files (%d bytes) but the manifest says %d files (%d bytes)", files, size, m.Files, m.Bytes)
		}
		return files, size, "size", nil
	}
	var bad []string
	for _, p := range sortedKeys(m.SHA256) {
		switch g, ok := got[p]; {
		case !ok:
			bad = append(bad, p+": missing")
		case g != m.SHA256[p]:
			bad = append(bad, fmt.Sprintf("%s: sha256 %.12s…, the manifest says %.12s…", p, g, m.SHA256[p]))
		}
	}
	for _, p := range sortedKeys(got) {
		if _, ok := m.SHA256[p]; !ok {
			bad = append(bad, p+": not in the manifest")
		}
	}
	if len(bad) > 0 {
		return files, size, "sha256", fmt.Errorf("the download does not match its manifest: %s", strings.Join(bad, "; "))
	}
	return files, size, "sha256", nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
