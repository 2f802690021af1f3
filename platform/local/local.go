package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/taoflow/taoflow/platform"
)

// Local is the local platform. Its zero value is not usable; call New. It is
// safe for concurrent use.
type Local struct {
	root string
	// maxOutput caps each captured stream; tests lower it.
	maxOutput int
}

var (
	_ platform.Platform = (*Local)(nil)
	_ platform.Creator  = (*Local)(nil)
	_ platform.Deleter  = (*Local)(nil)
	_ platform.Lister   = (*Local)(nil)
	_ platform.Namer    = (*Local)(nil)
	_ platform.Adopter  = (*Local)(nil)
)

// MaxOutput is the most bytes of each of stdout and stderr that Exec keeps.
// Beyond it the tail is kept and a marker line says how much was dropped.
const MaxOutput = 16 << 20

// New returns the local platform keeping its sandboxes under root
// (taoflow passes <state dir>/sandboxes). root is created when needed.
func New(root string) *Local {
	return &Local{root: filepath.Clean(root), maxOutput: MaxOutput}
}

// Kind returns "local".
func (l *Local) Kind() string { return "local" }

var (
	instanceName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	runName      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

func checkNames(run, name string) error {
	if !runName.MatchString(run) {
		return fmt.Errorf("local: run id %q is not a safe directory name ([A-Za-z0-9][A-Za-z0-9._-]*)", run)
	}
	if !instanceName.MatchString(name) {
		return fmt.Errorf("local: instance name %q must match [a-z0-9][a-z0-9-]*", name)
	}
	return nil
}

// Create makes (or, on resume, reuses) the sandbox root/<run>/<spec.Name>
// with its tmp directory. spec.Type is ignored; spec.Existing and spec.Host
// have no meaning locally and are refused.
func (l *Local) Create(ctx context.Context, run string, spec platform.Spec) (platform.Instance, error) {
	if ctx.Err() != nil {
		return platform.Instance{}, fmt.Errorf("local: create %s: %w", spec.Name, context.Cause(ctx))
	}
	if spec.Existing != "" || spec.Host != "" {
		return platform.Instance{}, fmt.Errorf("local: instance %s: the local platform has no existing or ssh hosts; every local instance is a new sandbox", spec.Name)
	}
	if err := checkNames(run, spec.Name); err != nil {
		return platform.Instance{}, err
	}
	root, err := filepath.Abs(l.root)
	if err != nil {
		return platform.Instance{}, fmt.Errorf("local: sandbox root: %w", err)
	}
	dir := root
	for _, part := range []string{"", run, spec.Name, "tmp"} {
		dir = filepath.Join(dir, part)
		if err := mkdirPrivate(dir); err != nil {
			return platform.Instance{}, fmt.Errorf("local: create %s: %w", spec.Name, err)
		}
	}
	return platform.Instance{
		Name:    spec.Name,
		Ref:     filepath.Join(root, run, spec.Name),
		Created: true,
		Attrs:   map[string]string{"run": run},
	}, nil
}

// Adopt takes back the sandbox of spec in run (platform.Adopter): it is
// made again in place, as Create does, and must be at ref.
func (l *Local) Adopt(ctx context.Context, run string, spec platform.Spec, ref string) (platform.Instance, error) {
	inst, err := l.Create(ctx, run, spec)
	if err == nil && inst.Ref != ref {
		return platform.Instance{}, fmt.Errorf("local: instance %s: its sandbox is %s now, not %s", spec.Name, inst.Ref, ref)
	}
	return inst, err
}

// InstanceRef is the sandbox directory Create makes for spec in run
// (platform.Namer).
func (l *Local) InstanceRef(run string, spec platform.Spec) string {
	root, err := filepath.Abs(l.root)
	if err != nil {
		root = l.root
	}
	return filepath.Join(root, run, spec.Name)
}

// mkdirPrivate makes dir with mode 0700 (and its parents, for the root), and
// accepts an existing directory but not a symlink or any other file.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	return nil
}

// Delete removes the sandbox inst.Ref and everything in it, first making
// read-only directories writable if that is what stops it. It removes only a
// path of the form root/<run>/<name> reached without symlinks, and refuses
// any other. A missing sandbox counts as deleted.
func (l *Local) Delete(ctx context.Context, inst platform.Instance) error {
	if ctx.Err() != nil {
		return fmt.Errorf("local: delete %s: %w", inst.Name, context.Cause(ctx))
	}
	dir, err := l.sandboxDir(inst.Ref)
	if err != nil {
		return fmt.Errorf("local: delete %s: %w", inst.Name, err)
	}
	if dir == "" {
		return nil // already gone
	}
	if err := os.RemoveAll(dir); err != nil {
		makeWritable(dir)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("local: delete %s: %w", inst.Name, err)
		}
	}
	_ = os.Remove(filepath.Dir(dir)) // the run directory, once it is empty
	return nil
}

// sandboxDir checks that ref names root/<run>/<name> and returns it with
// symlinks resolved, or "" when it does not exist.
func (l *Local) sandboxDir(ref string) (string, error) {
	if ref == "" {
		return "", errors.New("instance has no sandbox path")
	}
	root, err := filepath.Abs(l.root)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(ref)
	if err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if errors.Is(err, fs.ErrNotExist) {
		realRoot = root
	} else if err != nil {
		return "", err
	}
	var rel string
	for _, r := range []string{root, realRoot} {
		if x, err := filepath.Rel(r, abs); err == nil && isSandboxRel(x) {
			rel = x
			break
		}
	}
	if rel == "" {
		return "", fmt.Errorf("%s is not a sandbox under %s; refusing to remove it", ref, root)
	}
	want := filepath.Join(realRoot, rel)
	got, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fmt.Errorf("%s leads through a symlink to %s; refusing to remove it", ref, got)
	}
	return got, nil
}

// isSandboxRel reports whether rel, relative to the root, is <run>/<name>.
func isSandboxRel(rel string) bool {
	run, name := filepath.Split(rel)
	run = filepath.Clean(run)
	return filepath.Dir(run) == "." && checkNames(run, name) == nil
}

// makeWritable adds owner write and search permission to every directory
// under dir (not following symlinks), so that RemoveAll can empty them.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			if fi, err := d.Info(); err == nil {
				_ = os.Chmod(path, fi.Mode().Perm()|0o700)
			}
		}
		return nil // keep going past anything unreadable
	})
}

// List returns the sandboxes under the root, each with Attrs["run"] set to
// the run that created it.
func (l *Local) List(ctx context.Context) ([]platform.Instance, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("local: list: %w", context.Cause(ctx))
	}
	root, err := filepath.Abs(l.root)
	if err != nil {
		return nil, fmt.Errorf("local: list: %w", err)
	}
	runs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: list: %w", err)
	}
	var out []platform.Instance
	for _, run := range runs {
		if !run.IsDir() {
			continue
		}
		names, err := os.ReadDir(filepath.Join(root, run.Name()))
		if err != nil {
			return nil, fmt.Errorf("local: list: %w", err)
		}
		for _, name := range names {
			if !name.IsDir() || checkNames(run.Name(), name.Name()) != nil {
				continue
			}
			out = append(out, platform.Instance{
				Name:    name.Name(),
				Ref:     filepath.Join(root, run.Name(), name.Name()),
				Created: true,
				Attrs:   map[string]string{"run": run.Name()},
			})
		}
	}
	return out, nil
}
