// Package provenance records what produced a run: the git state of the
// repository that holds the plan, taoflow's version, and who ran apply
// where. It runs git with a minimal environment and no stdin, and never
// keeps a credential that a remote URL holds.
package provenance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"
)

// Info is a run's provenance, kept in the state and in every
// taoflow-run.json.
type Info struct {
	Git *Git `json:"git"`
	// Version is taoflow's version (and build revision when known).
	Version string `json:"taoflow_version"`
	// PlanPath is the plan file's absolute path on the machine that ran
	// apply.
	PlanPath string `json:"plan_path"`
	User     string `json:"user"`
	Host     string `json:"host"`
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
	// Changed are the paths `git status --porcelain` lists (untracked
	// files included), relative to Root.
	Changed []string `json:"changed,omitempty"`
	// Remote is origin's URL (or the first remote's) with any user name,
	// password or query removed.
	Remote string `json:"remote,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Collect gathers the provenance of a plan at planPath. It does not fail:
// what it cannot learn is left empty (Git.Note says why git told nothing).
func Collect(ctx context.Context, planPath, version string) Info {
	abs, err := filepath.Abs(planPath)
	if err != nil {
		abs = planPath
	}
	info := Info{Version: version, PlanPath: abs}
	info.User, info.Host = Who()
	info.Git = GitState(ctx, filepath.Dir(abs))
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

// GitState describes the repository holding dir.
func GitState(ctx context.Context, dir string) *Git {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	g := &Git{}
	root, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		var ee *exec.Error
		switch {
		case errors.As(err, &ee):
			g.Note = "git is not installed"
		case strings.Contains(err.Error(), "not a git repository"):
			g.Note = "not in a git repository"
		default:
			g.Note = firstLine(err.Error()) // such as a repository owned by someone else
		}
		return g
	}
	g.Repo, g.Root = true, strings.TrimSpace(string(root))
	if out, err := git(ctx, dir, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		g.Commit = strings.TrimSpace(string(out))
	} else {
		g.Note = "no commit yet"
	}
	if out, err := git(ctx, dir, "symbolic-ref", "-q", "--short", "HEAD"); err == nil {
		g.Branch = strings.TrimSpace(string(out))
	}
	out, err := git(ctx, g.Root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		g.Note = "git status failed: " + firstLine(err.Error())
		return g
	}
	g.Changed = porcelainPaths(out)
	g.Dirty = len(g.Changed) > 0
	if g.Dirty && g.Commit != "" {
		if diff, err := git(ctx, g.Root, "diff", "--no-ext-diff", "--no-color", "--binary", "HEAD"); err == nil {
			sum := sha256.Sum256(diff)
			g.DiffHash = hex.EncodeToString(sum[:])
		}
	}
	g.Remote = remote(ctx, g.Root)
	return g
}

// remote returns origin's URL, or the first remote's, without credentials.
func remote(ctx context.Context, dir string) string {
	out, err := git(ctx, dir, "remote")
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
	u, err := git(ctx, dir, "config", "--get", "remote."+name+".url")
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

// porcelainPaths reads `git status --porcelain=v1 -z`: "XY path\0", a
// rename followed by its original path as one more entry.
func porcelainPaths(out []byte) []string {
	var paths []string
	entries := bytes.Split(out, []byte{0})
	for i := 0; i < len(entries); i++ {
		e := string(entries[i])
		if len(e) < 4 {
			continue
		}
		paths = append(paths, e[3:])
		if e[0] == 'R' || e[0] == 'C' {
			i++ // the original path
		}
	}
	return paths
}

// git runs git in dir with a minimal environment (no credential helpers
// prompt, no pager, no optional locks) and stdin from /dev/null.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir, "-c", "core.fsmonitor=false"}, args...)...)
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_PAGER=cat", "LC_ALL=C"}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	cmd.Stdin = nil // /dev/null
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(stderr.String()))
		}
		return nil, err
	}
	return out, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
