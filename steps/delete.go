package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/taoflow/taoflow/platform"
)

// Cleanup stops every job of this run on inst, before the instance is
// deleted or let go: host processes (job ids starting with tf-<run>-) and,
// when the plan runs containers (or there is no plan), the containers
// labelled taoflow.run=<run>, which it also removes. An instance that no
// longer exists has nothing to stop.
func (s *Steps) Cleanup(ctx context.Context, inst platform.Instance) error {
	s.unwatch(inst.Name)
	_, err := s.cleanup(ctx, inst)
	return err
}

// ErrStopTimedOut is what CleanupBefore's error wraps when the jobs'
// stop ran out of its time (Config.StopTimeout).
var ErrStopTimedOut = errors.New("timed out")

// CleanupBefore is Cleanup bounded by Config.StopTimeout, for the release
// of an instance: one that is deleted (or stopped) next, which ends its
// jobs anyway, or let go. A hung instance (connected, then silent) cannot
// take the time of its own delete, nor all of the teardown's. An error
// wraps ErrStopTimedOut when the time ran out.
func (s *Steps) CleanupBefore(ctx context.Context, inst platform.Instance) error {
	s.unwatch(inst.Name)
	_, err := s.cleanupBefore(ctx, inst)
	return err
}

func (s *Steps) cleanupBefore(ctx context.Context, inst platform.Instance) ([]string, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.StopTimeout, fmt.Errorf("%w after %s", ErrStopTimedOut, s.cfg.StopTimeout))
	defer cancel()
	lines, err := s.cleanup(cctx, inst)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = context.Cause(cctx)
	}
	return lines, err
}

// keepJobDirs reports whether the run's job directories on inst outlive
// its teardown: only on an instance the plan keeps (keep: true), where the
// user asked to look at what is left. Elsewhere, an ssh host or an
// existing instance above all, they are removed once the jobs are stopped:
// by then the wait steps have copied their logs into the node logs.
func (s *Steps) keepJobDirs(inst platform.Instance) bool {
	if s.cfg.Plan == nil {
		return false
	}
	pi := s.cfg.Plan.Instance(inst.Name)
	return pi != nil && pi.Keep
}

func (s *Steps) cleanup(ctx context.Context, inst platform.Instance) ([]string, error) {
	s.stopRenewer(inst.Name)
	lines, err := s.process.cleanup(ctx, inst)
	lines = s.decisions(inst.Name, lines)
	if errors.Is(err, platform.ErrNotFound) {
		return lines, nil
	}
	if s.cfg.Plan == nil || s.cfg.Plan.RunsContainers() {
		more, cerr := s.docker.cleanup(ctx, inst)
		lines = append(lines, more...)
		if errors.Is(cerr, platform.ErrNotFound) {
			cerr = nil
		}
		err = errors.Join(err, cerr)
	}
	return lines, err
}

// delete stops the run's jobs on the instance, then releases it.
func (s *Steps) delete(ctx context.Context, req Request) error {
	force, _, err := withBool(req.With, "force")
	if err != nil {
		return err
	}
	inst := req.Instance
	// An instance this run created and does not keep is deleted next,
	// which stops its jobs.
	deleting := inst.Created && !s.keepJobDirs(inst)
	var lines []string
	var cerr error
	if req.NoJobs {
		fmt.Fprintf(req.Log, "no job of this run can be running on %s: none to stop\n", inst.Name)
	} else {
		fmt.Fprintf(req.Log, "stopping this run's jobs on %s\n", inst.Name)
		lines, cerr = s.cleanupBefore(ctx, inst)
	}
	for _, l := range lines {
		fmt.Fprintln(req.Log, l)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	switch {
	case deleting && errors.Is(cerr, ErrStopTimedOut):
		fmt.Fprintf(req.Log, "could not stop the jobs on %s (%s); deleting it\n", inst.Name, cerr)
	case cerr != nil:
		// Deleting the instance stops them anyway; an instance this run
		// did not create keeps them, which is reported below.
		fmt.Fprintf(req.Log, "could not stop the jobs on %s: %s\n", inst.Name, s.redact.Redact(cerr.Error()))
	}
	if req.Release == nil {
		return &Error{Class: ClassDeleteFailed, Msg: fmt.Sprintf("no way to release %s", inst.Name)}
	}
	if force {
		fmt.Fprintf(req.Log, "releasing %s (force: even if a results upload or fetch on it failed)\n", inst.Name)
	} else {
		fmt.Fprintf(req.Log, "releasing %s\n", inst.Name)
	}
	if err := req.Release(ctx, force); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return s.fail(ClassDeleteFailed, err, "releasing %s: %v", inst.Name, err)
	}
	if cerr != nil && !inst.Created {
		return s.fail(ClassDeleteFailed, cerr, "jobs of this run may still run on %s (not created by this run, so not deleted): %v", inst.Name, cerr)
	}
	return nil
}

// Container is a container that a taoflow run labelled.
type Container struct {
	Name     string // the container name (the job id)
	Run      string // its taoflow.run label
	Instance string // its taoflow.instance label ("" before instances were labelled)
	State    string // docker's state: running, exited, created, ...
	Owner    string // its taoflow.owner label, HOST:PID ("" before owners were labelled)
}

// LabelledContainers lists every container on inst that carries a
// taoflow.run label, whatever the run: what `taoflow reap` looks through.
// An instance without docker has none.
func (s *Steps) LabelledContainers(ctx context.Context, inst platform.Instance) ([]Container, error) {
	sc := script(Params{
		"tf_label":  labelRun,
		"tf_format": `{{.Names}} {{.State}} {{.Label "` + labelRun + `"}} owner={{.Label "` + labelOwner + `"}} instance={{.Label "` + labelInstance + `"}}`,
		"tf_quiet":  "1",
	}, "docker-labelled")
	res, err := s.exec(ctx, inst, sc, nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("listing taoflow containers on %s: exit code %d: %s", inst.Name, res.ExitCode, s.dockerError(res.Stderr))
	}
	var out []Container
	for _, l := range outputLines(res.Stdout) {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		c := Container{Name: f[0], State: f[1], Run: f[2]}
		c.Owner = strings.TrimPrefix(f[3], "owner=")
		c.Instance = strings.TrimPrefix(f[4], "instance=")
		out = append(out, c)
	}
	return out, nil
}

// RemoveContainers force-removes the named containers on inst and their
// anonymous volumes; a container already gone is not an error.
func (s *Steps) RemoveContainers(ctx context.Context, inst platform.Instance, names []string) error {
	for _, n := range names {
		if !jobIDRE.MatchString(n) {
			return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("container name %q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", n)}
		}
	}
	_, err := s.docker.(*docker).remove(ctx, inst, names)
	return err
}
