package steps

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestJobDirsPrivate: under a permissive umask, on an instance where an
// older taoflow left ~/.taoflow 0755, a job's directory and its log (which
// holds whatever the job printed) are the user's alone, and so is
// ~/.taoflow; at teardown the run's job directories are removed, unless
// the plan keeps the instance.
func TestJobDirsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "removed at teardown", true: "kept with keep: true"}[keep]
		t.Run(name, func(t *testing.T) {
			p := &plan.Plan{Instances: []*plan.Instance{{Name: "a", Keep: keep}}}
			e := newEnv(t, func(c *Config) { c.Plan = p })
			home := filepath.Join(e.inst.Ref, ".taoflow")
			if err := os.MkdirAll(filepath.Join(home, "jobs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(home, 0o755); err != nil {
				t.Fatal(err)
			}
			const id = "tf-r1-train-a"
			e.runJob(t, e.steps, id, with("command", "echo the job printed this"))
			if log, _, err := e.waitJobs(context.Background(), e.steps, nil, Job{ID: id}); err != nil || !strings.Contains(log.String(), "the job printed this") {
				t.Fatalf("wait: %v\n%s", err, log)
			}
			modes := map[string]os.FileMode{}
			for _, p := range []string{home, e.jobDir(id), filepath.Join(e.jobDir(id), "log")} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o077 != 0 {
					modes[p] = fi.Mode().Perm()
				}
			}
			for p, m := range modes {
				t.Errorf("%s has mode %04o: others can read it", p, m)
			}
			if err := e.steps.Cleanup(context.Background(), e.inst); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(e.jobDir(id))
			switch {
			case keep && err != nil:
				t.Errorf("the job directory of a kept instance is gone: %v", err)
			case !keep && !errors.Is(err, os.ErrNotExist):
				t.Errorf("the job directory outlived the teardown (%v)", err)
			}
		})
	}
}
