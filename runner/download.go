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
	"os"
	"os/exec"
	"path/filepath"
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

// DownloadResults copies the results the uploads of run put (s3:// with the
// local AWS CLI and the endpoint and region the upload used, or file://)
// into dir/CELL/STEP (dir/@INSTANCE/STEP without a matrix) and verifies
// each copy against its taoflow-run.json: the file count and bytes, and
// every file's sha256 where the manifest has them. cells, when given,
// picks the cells. A copy that does not match is an error of its own
// Download; the others go on.
func DownloadResults(ctx context.Context, store *state.Store, runID string, cells []string, dir string) ([]Download, error) {
	nodes, err := store.Nodes(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []Download
	found := map[string]bool{}
	for _, n := range nodes {
		from := n.Facts[factUploadURL]
		if from == "" || n.State != string(engine.Succeeded) {
			continue
		}
		if len(cells) > 0 && !slices.Contains(cells, n.Cell) {
			continue
		}
		found[n.Cell] = true
		where := n.Cell
		if where == "" {
			where = "@" + n.Instance
		}
		d := Download{Node: n.ID, Cell: n.Cell, From: from, To: filepath.Join(dir, where, n.Step)}
		d.Err = fetch(ctx, n.Facts, from, d.To)
		if d.Err == nil {
			d.Files, d.Bytes, d.Checked, d.Err = verify(d.To)
		}
		out = append(out, d)
	}
	for _, c := range cells {
		if !found[c] {
			return out, fmt.Errorf("run %s has no uploaded results for cell %q", runID, c)
		}
	}
	return out, nil
}

// fetch copies from into to.
func fetch(ctx context.Context, facts map[string]string, from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	if p, ok := strings.CutPrefix(from, "file://"); ok {
		return copyTree(p, to)
	}
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

// copyTree copies the regular files and directories under src into dst;
// symbolic links are not followed.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(target, 0o755)
		case !e.Type().IsRegular():
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
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
