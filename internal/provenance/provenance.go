// Package provenance records what produced a run: the git state of the
// repository that holds the plan, taoflow's version, and who ran apply
// where. It runs git through internal/gitcli (a minimal environment, no
// stdin, a deadline), never keeps a credential that a remote URL holds,
// keeps the list of changed files bounded, and never fails: what it could
// not learn is said in Git.Note.
package provenance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/gitcli"
)

// MaxChanged is how many changed paths a provenance keeps by name; the
// rest are counted and digested (Git.ChangedCount, Git.ChangedDigest).
const MaxChanged = 50

// DefaultTimeout bounds all the git commands of one Collect.
const DefaultTimeout = 20 * time.Second

// Levels of detail of a provenance (the plan's `provenance:`).
const (
	// LevelMinimal leaves out what says who ran the run and where:
	// absolute paths, the user and the host name. The default in
	// manifests and notifications.
	LevelMinimal = "minimal"
	// LevelFull keeps everything, as the local state does.
	LevelFull = "full"
)

// Info is a run's provenance, kept whole in the state; manifests and
// notifications carry Shared's view of it.
type Info struct {
	Git *Git `json:"git"`
	// Version is taoflow's version (and build revision when known).
	Version string `json:"taoflow_version"`
	// PlanPath is the plan file's absolute path on the machine that ran
	// apply; in a minimal view, its path in the repository (or its base
	// name outside one).
	PlanPath string `json:"plan_path"`
	User     string `json:"user,omitempty"`
	Host     string `json:"host,omitempty"`
	// Level is LevelMinimal in a view that left the user, host and
	// absolute paths out; empty (or LevelFull) otherwise.
	Level string `json:"level,omitempty"`
}

// Git is the state of the repository that holds the plan.
type Git struct {
	// Repo is false when the plan is not in a git repository (or git is
	// missing); the other fields are then empty and Note says why.
	Repo   bool   `json:"repo"`
	Root   string `json:"root,omitempty"`
	Commit string `json:"commit,omitempty"` // empty in a repository with no commit yet
	Branch string `json:"branch,omitempty"` // empty on a detached HEAD
	Dirty  bool   `json:"dirty"`
	// DiffHash is the sha256 of `git diff HEAD` when Dirty.
	DiffHash string `json:"diff_sha256,omitempty"`
	// ChangedCount is how many paths `git status --porcelain` lists
	// (untracked files included, ignored ones and taoflow's state
	// directory not), relative to Root.
	ChangedCount int `json:"changed_count,omitempty"`
	// Changed are the first MaxChanged of those paths, in git's order.
	Changed []string `json:"changed,omitempty"`
	// ChangedDigest is the sha256 of the whole list: each path followed
	// by a NUL byte, in git's order.
	ChangedDigest string `json:"changed_sha256,omitempty"`
	// Remote is origin's URL (or the first remote's) with any user name,
	// password or query removed.
	Remote string `json:"remote,omitempty"`
	// Note says what git could not tell (not a repository, no commit yet,
	// a git that failed or did not answer in time).
	Note string `json:"note,omitempty"`
}

// Changes is how many changed paths g lists (ChangedCount, or, in a
// provenance recorded before it was counted, the length of Changed).
func (g *Git) Changes() int {
	if g.ChangedCount > len(g.Changed) {
		return g.ChangedCount
	}
	return len(g.Changed)
}

func (g *Git) note(s string) {
	if g.Note == "" {
		g.Note = s
	} else {
		g.Note += "; " + s
	}
}

// Options tunes Collect.
type Options struct {
	// Exclude are directories left out of the changed files (taoflow's
	// state directory): absolute, or relative to the working directory.
	Exclude []string
	// Timeout bounds all git commands together; DefaultTimeout when 0.
	Timeout time.Duration
}

// Collect gathers the provenance of a plan at planPath. It does not fail:
// what it cannot learn is left empty (Git.Note says why git told nothing).
func Collect(ctx context.Context, planPath, version string, opts Options) Info {
	abs, err := filepath.Abs(planPath)
	if err != nil {
		abs = planPath
	}
	info := Info{Version: version, PlanPath: abs}
	info.User, info.Host = Who()
	info.Git = GitState(ctx, filepath.Dir(abs), opts)
	return info
}

// Who is this process's user name and host name, as Collect records them.
func Who() (userName, host string) {
	host, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		return u.Username, host
	}
	return os.Getenv("USER"), host
}

// Shared is the view of i that manifests and notifications carry: at
// LevelFull, i as it is; otherwise (LevelMinimal, the default) without the
// user, the host, the repository's absolute root and a remote that is a
// path on this machine, and with the plan's path relative to the
// repository (its base name outside one). The changed paths are bounded in
// both, also for a provenance recorded before they were.
func (i *Info) Shared(level string) *Info {
	if i == nil {
		return nil
	}
	out := *i
	if i.Git != nil {
		g := *i.Git
		if len(g.Changed) > MaxChanged {
			g.ChangedCount = len(g.Changed)
			g.ChangedDigest = listDigest(g.Changed)
			g.Changed = g.Changed[:MaxChanged]
		}
		out.Git = &g
	}
	if level == LevelFull {
		return &out
	}
	out.Level, out.User, out.Host = LevelMinimal, "", ""
	out.PlanPath = filepath.Base(i.PlanPath)
	if g := out.Git; g != nil {
		if g.Root != "" {
			if rel, err := filepath.Rel(g.Root, i.PlanPath); err == nil && filepath.IsLocal(rel) {
				out.PlanPath = filepath.ToSlash(rel)
			}
		}
		g.Root = ""
		if filepath.IsAbs(g.Remote) || strings.HasPrefix(g.Remote, "file:") {
			g.Remote = ""
		}
	}
	return &out
}

func listDigest(paths []string) string {
	h := sha256.New()
	for _, p := range paths {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// GitState describes the repository holding dir. The git commands share
// one deadline (opts.Timeout); a git that fails or does not answer in time
// leaves what it would have told empty and says so in Note.
func GitState(ctx context.Context, dir string, opts Options) *Git {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("git did not answer within %s (killed)", timeout))
	defer cancel()
	g := &Git{}
	root, err := gitcli.Output(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		switch {
		case errors.Is(err, gitcli.ErrNoGit):
			g.Note = "git is not installed"
		case strings.Contains(err.Error(), "not a git repository"):
			g.Note = "not in a git repository"
		default:
			g.Note = err.Error() // such as a repository owned by someone else
		}
		return g
	}
	g.Repo, g.Root = true, strings.TrimSpace(string(root))
	if out, err := gitcli.Output(ctx, dir, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		g.Commit = strings.TrimSpace(string(out))
	} else if ctx.Err() != nil {
		g.note(err.Error())
		return g
	} else {
		g.note("no commit yet")
	}
	if out, err := gitcli.Output(ctx, dir, "symbolic-ref", "-q", "--short", "HEAD"); err == nil {
		g.Branch = strings.TrimSpace(string(out))
	}
	if err := changes(ctx, g, excludes(g.Root, opts.Exclude)); err != nil {
		g.note("changed files unknown: " + err.Error())
		return g
	}
	if g.Dirty && g.Commit != "" {
		h := sha256.New()
		if err := stream(ctx, g.Root, h, "diff", "--no-ext-diff", "--no-textconv", "--no-color", "--binary", "HEAD"); err == nil {
			g.DiffHash = hex.EncodeToString(h.Sum(nil))
		} else {
			g.note("diff hash unknown: " + err.Error())
		}
	}
	g.Remote = remote(ctx, g.Root)
	return g
}

// excludes are the pathspecs that leave out each of dirs that lies inside
// root (relative to it, literal).
func excludes(root string, dirs []string) []string {
	var out []string
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		// The root git names is a real path; so must the directory be.
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		out = append(out, ":(exclude,literal)"+filepath.ToSlash(rel))
	}
	return out
}

// changes reads `git status --porcelain=v1 -z` as it comes: it counts the
// paths, digests the whole list and keeps the first MaxChanged, so a
// tree with any number of untracked files costs the same memory.
func changes(ctx context.Context, g *Git, exclude []string) error {
	args := []string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."}
	cmd := gitcli.Command(ctx, g.Root, append(args, exclude...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return gitcli.Explain(ctx, "status", err, nil)
	}
	h := sha256.New()
	n, first, rerr := porcelainPaths(bufio.NewReaderSize(out, 64<<10), h)
	if rerr != nil {
		_ = cmd.Process.Kill()
	}
	if err := cmd.Wait(); err != nil {
		return gitcli.Explain(ctx, "status", err, stderr.Bytes())
	}
	if rerr != nil {
		return rerr
	}
	g.ChangedCount, g.Changed, g.Dirty = n, first, n > 0
	if n > 0 {
		g.ChangedDigest = hex.EncodeToString(h.Sum(nil))
	}
	return nil
}

// stream runs git and copies its stdout to w.
func stream(ctx context.Context, dir string, w io.Writer, args ...string) error {
	cmd := gitcli.Command(ctx, dir, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &limitedBuffer{buf: &stderr, max: 4096}
	if err := cmd.Run(); err != nil {
		return gitcli.Explain(ctx, args[0], err, stderr.Bytes())
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// remote returns origin's URL, or the first remote's, without credentials.
func remote(ctx context.Context, dir string) string {
	out, err := gitcli.Output(ctx, dir, "remote")
	if err != nil {
		return ""
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return ""
	}
	name := names[0]
	for _, n := range names {
		if n == "origin" {
			name = n
		}
	}
	u, err := gitcli.Output(ctx, dir, "config", "--get", "remote."+name+".url")
	if err != nil {
		return ""
	}
	return CleanURL(strings.TrimSpace(string(u)))
}

// CleanURL removes what may be a credential from a remote URL: the user
// information (user:token@) and the query and fragment of a URL with a
// scheme; an scp-like address (git@host:path) keeps its user, which is no
// secret, but loses anything after a ':' in it.
func CleanURL(raw string) string {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			// Unparsable: keep only the scheme and what follows the last '@'.
			scheme, rest, _ := strings.Cut(raw, "://")
			if i := strings.LastIndex(rest, "@"); i >= 0 {
				rest = rest[i+1:]
			}
			if i := strings.IndexAny(rest, "?#"); i >= 0 {
				rest = rest[:i]
			}
			return scheme + "://" + rest
		}
		u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
		return u.String()
	}
	// scp-like: [user@]host:path
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		user := raw[:at]
		if i := strings.IndexAny(user, ":"); i >= 0 {
			user = user[:i]
		}
		return user + raw[at:]
	}
	return raw
}

// porcelainPaths reads `git status --porcelain=v1 -z` ("XY path\0", a
// rename or copy followed by its original path as one more entry): it
// returns how many paths it read and the first MaxChanged, and writes
// each path and a NUL to h.
func porcelainPaths(r *bufio.Reader, h hash.Hash) (n int, first []string, err error) {
	skip := false
	for {
		e, err := r.ReadSlice(0)
		if errors.Is(err, bufio.ErrBufferFull) {
			// A path longer than the buffer: read the rest of it.
			long := append([]byte(nil), e...)
			for errors.Is(err, bufio.ErrBufferFull) {
				e, err = r.ReadSlice(0)
				long = append(long, e...)
			}
			e = long
		}
		if errors.Is(err, io.EOF) {
			return n, first, nil
		}
		if err != nil {
			return n, first, err
		}
		e = e[:len(e)-1]
		if skip {
			skip = false // the original path of a rename
			continue
		}
		if len(e) < 4 {
			continue
		}
		p := e[3:]
		n++
		h.Write(p)
		h.Write([]byte{0})
		if len(first) < MaxChanged {
			first = append(first, string(p))
		}
		skip = e[0] == 'R' || e[0] == 'C'
	}
}
