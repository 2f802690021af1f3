package brev

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taoflow/taoflow/platform"
)

// Statuses of `brev ls --json` that this package acts on.
const (
	statusRunning   = "RUNNING"
	statusUnhealthy = "UNHEALTHY" // RUNNING, but its health check fails
	statusFailure   = "FAILURE"
	statusStopping  = "STOPPING"
	statusStopped   = "STOPPED"
	statusDeleting  = "DELETING"
)

// maxLsFailures is how many `brev ls` in a row may fail while a wait goes
// on (a network hiccup, an expiring token being refreshed).
const maxLsFailures = 5

// maxMissing is how many polls in a row may miss an instance that brev
// create reported made, before it counts as gone.
const maxMissing = 5

// deleteTries is how many times `brev delete` is tried before Delete gives
// up; the pause between tries doubles from PollInterval.
const deleteTries = 3

// errDeadline ends a poll whose deadline passed.
var errDeadline = errors.New("deadline passed")

// List returns every instance `brev ls --json` shows — the user's own and
// those shared with them in the active org, not only taoflow's. Ref and
// Name are the instance name; Attrs hold id, status, type and build_status.
// Created is false: List cannot tell who made an instance (names that begin
// with Prefix are taoflow's by convention).
func (b *Brev) List(ctx context.Context) ([]platform.Instance, error) {
	if _, err := b.Check(ctx); err != nil {
		return nil, err
	}
	ws, err := b.ls(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]platform.Instance, 0, len(ws))
	for _, w := range ws {
		out = append(out, platform.Instance{
			Name: w.Name,
			Ref:  w.Name,
			Attrs: map[string]string{
				"id":           w.ID,
				"status":       w.Status,
				"type":         w.InstanceType,
				"build_status": w.BuildStatus,
			},
		})
	}
	return out, nil
}

// Find looks the instance up in `brev ls --json` (platform.Finder): an
// instance that is not listed, or is DELETING, is gone (platform.ErrNotFound);
// a STOPPED or STOPPING one is platform.ErrStopped. It never reaches the
// instance, so it answers at once for one that ssh cannot reach.
func (b *Brev) Find(ctx context.Context, inst platform.Instance) error {
	if _, err := b.Check(ctx); err != nil {
		return err
	}
	ws, err := b.lsRetry(ctx)
	if err != nil {
		return err
	}
	w, ok := find(ws, inst.Ref)
	switch {
	case !ok:
		return fmt.Errorf("brev instance %s (%s) is not in `brev ls`: %w", inst.Name, inst.Ref, platform.ErrNotFound)
	case w.Status == statusDeleting:
		return fmt.Errorf("brev instance %s (%s) is being deleted: %w", inst.Name, inst.Ref, platform.ErrNotFound)
	case w.Status == statusStopped || w.Status == statusStopping:
		return fmt.Errorf("brev instance %s (%s) is %s: %w", inst.Name, inst.Ref, w.Status, platform.ErrStopped)
	}
	return nil
}

// ls runs `brev ls --json` once.
func (b *Brev) ls(ctx context.Context) ([]Workspace, error) {
	out, err := b.call(ctx, "ls", "--json")
	if err != nil {
		return nil, err
	}
	return ParseList(out)
}

// lsRetry runs `brev ls --json` until it succeeds, at most maxLsFailures
// times, PollInterval apart.
func (b *Brev) lsRetry(ctx context.Context) ([]Workspace, error) {
	for try := 1; ; try++ {
		ws, err := b.ls(ctx)
		if err == nil || ctx.Err() != nil || try == maxLsFailures {
			return ws, err
		}
		if err := sleep(ctx, b.cfg.PollInterval); err != nil {
			return nil, fmt.Errorf("brev ls --json: %w", err)
		}
	}
}

// poll runs `brev ls --json` every PollInterval and gives each listing to
// check, until check says done or fails, ctx is done, maxLsFailures calls
// in a row fail, or deadline passes (errDeadline, after a last look at
// the deadline).
func (b *Brev) poll(ctx context.Context, deadline time.Time, check func([]Workspace) (bool, error)) error {
	failures := 0
	for {
		ws, err := b.ls(ctx)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("brev ls --json: %w", context.Cause(ctx))
		case err != nil:
			failures++
			if failures >= maxLsFailures {
				return fmt.Errorf("brev ls --json failed %d times in a row: %w", failures, err)
			}
		default:
			failures = 0
			done, err := check(ws)
			if err != nil || done {
				return err
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errDeadline
		}
		if err := sleep(ctx, min(b.cfg.PollInterval, left)); err != nil {
			return fmt.Errorf("waiting for brev: %w", err)
		}
	}
}

// Create makes the instance spec describes for run and returns it when it
// is RUNNING and answers a probe (`echo ok`, through the transport), all
// within CreateTimeout.
//
// With spec.Existing, nothing is created: the instance of that name (or
// id) is looked up in `brev ls --json` and waited for, refreshed and
// probed, and comes back with Created false, so Delete and Stop refuse it.
// A STOPPED one is refused: taoflow never starts an instance it does not
// own.
//
// Otherwise the instance is named InstanceName(run, spec.Name) and made
// with `brev create --type spec.Type --detached`. When anything fails —
// brev create itself (which can fail after the instance was made), a
// FAILURE status, CreateTimeout, a probe that never answers, or ctx — the
// instance is looked up by name and, when it exists, deleted before Create
// returns, on a context that ctx's cancellation does not end; the error
// says what became of it.
func (b *Brev) Create(ctx context.Context, run string, spec platform.Spec) (platform.Instance, error) {
	if b.closed.Load() {
		return platform.Instance{}, fmt.Errorf("brev instance %s: the brev platform is closed", spec.Name)
	}
	if _, err := b.Check(ctx); err != nil {
		return platform.Instance{}, err
	}
	if spec.Existing != "" {
		return b.adopt(ctx, spec)
	}
	types := strings.Join(strings.Fields(strings.ReplaceAll(spec.Type, ",", " ")), ",")
	if types == "" {
		return platform.Instance{}, fmt.Errorf("brev instance %s: no instance type: give create: {type: …}", spec.Name)
	}
	if !validType(types) {
		return platform.Instance{}, fmt.Errorf("brev instance %s: type %q is not a comma-separated list of instance types", spec.Name, spec.Type)
	}
	name := InstanceName(run, spec.Name)
	inst := platform.Instance{Name: spec.Name, Ref: name, Created: true, Attrs: map[string]string{"type": types}}
	start := time.Now()
	deadline := start.Add(b.cfg.CreateTimeout)

	if err := record(b.ledger, name); err != nil {
		// Only reap is the less sure for it: it will not delete the
		// instance, which the state still records.
		b.progress(spec.Name, fmt.Sprintf("could not record %s for taoflow reap in %s: %v", name, b.ledger, err))
	}
	b.progress(spec.Name, fmt.Sprintf("creating %s (%s)", name, types))
	if _, err := b.call(ctx, "create", "--type", types, "--detached", "--", name); err != nil {
		return platform.Instance{}, b.abandon(ctx, inst, fmt.Errorf("brev create failed: %w", err), true)
	}
	w, err := b.waitRunning(ctx, inst, start, deadline)
	if err != nil {
		return platform.Instance{}, b.abandon(ctx, inst, err, false)
	}
	inst.Attrs["id"] = w.ID
	if w.InstanceType != "" {
		// The type brev made it with (`ls --json`): one of the chain.
		inst.Attrs["type"] = w.InstanceType
	}
	offerAttrs(inst.Attrs, inst.Attrs["type"], spec.Offers)
	if err := b.ready(ctx, inst, start, deadline); err != nil {
		return platform.Instance{}, b.abandon(ctx, inst, err, false)
	}
	b.progress(spec.Name, fmt.Sprintf("ready (%s)", since(start)))
	return inst, nil
}

// validType reports whether t is a comma-separated list of instance types
// that cannot be read as a flag.
func validType(t string) bool {
	for _, one := range strings.Split(t, ",") {
		if one == "" || one[0] == '-' {
			return false
		}
		for i := 0; i < len(one); i++ {
			c := one[i]
			if !nameByte(c) && c != ':' && c != '@' && c != '+' {
				return false
			}
		}
	}
	return true
}

// safeName reports whether name can go on a brev command line as an
// instance name (after "--") and be an ssh alias: no space, quote or
// control character, and no leading "-".
func safeName(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`"'\`+"`$", r) {
			return false
		}
	}
	return true
}

// Adopt takes back instance ref that this run created before (a resumed
// run; platform.Adopter): it waits for it to be RUNNING, refreshes and
// probes it as Create does, and returns it Created, so that Delete will
// delete it. A STOPPED one is refused, as for an existing instance.
func (b *Brev) Adopt(ctx context.Context, run string, spec platform.Spec, ref string) (platform.Instance, error) {
	if !strings.HasPrefix(ref, Prefix) {
		return platform.Instance{}, fmt.Errorf("brev instance %s: %q is not a name taoflow gives (%s…)", spec.Name, ref, Prefix)
	}
	spec.Existing = ref
	inst, err := b.Create(ctx, run, spec)
	if err != nil {
		return platform.Instance{}, err
	}
	inst.Name, inst.Created = spec.Name, true
	return inst, nil
}

// adopt makes an existing instance ready without creating, starting or
// ever deleting it.
func (b *Brev) adopt(ctx context.Context, spec platform.Spec) (platform.Instance, error) {
	name := spec.Existing
	fail := func(err error) (platform.Instance, error) {
		return platform.Instance{}, fmt.Errorf("existing brev instance %s (instance %s): %w", name, spec.Name, err)
	}
	if !safeName(name) {
		return fail(errors.New("not a brev instance name"))
	}
	start := time.Now()
	deadline := start.Add(b.cfg.CreateTimeout)
	ws, err := b.lsRetry(ctx)
	if err != nil {
		return fail(err)
	}
	w, ok := find(ws, name)
	if !ok {
		return fail(errors.New("not in `brev ls`: check the name, and that brev is logged in to the org that has it"))
	}
	inst := platform.Instance{Name: spec.Name, Ref: w.Name, Attrs: map[string]string{"id": w.ID, "type": w.InstanceType}}
	offerAttrs(inst.Attrs, w.InstanceType, spec.Offers)
	if !safeName(w.Name) {
		return fail(fmt.Errorf("its name %q cannot be an ssh alias", w.Name))
	}
	if w.Status != statusRunning && w.Status != statusUnhealthy {
		if err := unusable(w, false); err != nil {
			return fail(err)
		}
		if _, err := b.waitRunning(ctx, inst, start, deadline); err != nil {
			return fail(err)
		}
	}
	if err := b.ready(ctx, inst, start, deadline); err != nil {
		return fail(err)
	}
	b.progress(spec.Name, fmt.Sprintf("ready (%s)", since(start)))
	return inst, nil
}

// unusable returns why w, not RUNNING, will never be: nil while it may
// still become RUNNING (DEPLOYING, STARTING, an empty or unknown status).
func unusable(w Workspace, created bool) error {
	switch w.Status {
	case statusFailure:
		return fmt.Errorf("%s failed (status FAILURE, build status %q)", w.Name, w.BuildStatus)
	case statusStopped, statusStopping:
		if !created {
			return fmt.Errorf("%s is %s, and taoflow will not start an instance it does not own (starting it bills its owner): start it with `brev start %s` and run again", w.Name, w.Status, w.Name)
		}
		return fmt.Errorf("%s is %s while taoflow waits for it to run", w.Name, w.Status)
	case statusDeleting:
		return fmt.Errorf("%s is being deleted", w.Name)
	}
	return nil
}

// waitRunning polls until inst is RUNNING (or UNHEALTHY: RUNNING, with a
// failing health check; the probe decides). build_status and shell_status
// are not waited for: they can stick at CREATE_FAILED or "" on a healthy
// instance.
func (b *Brev) waitRunning(ctx context.Context, inst platform.Instance, start, deadline time.Time) (Workspace, error) {
	var last Workspace
	missing := 0
	err := b.poll(ctx, deadline, func(ws []Workspace) (bool, error) {
		w, ok := find(ws, inst.Ref)
		if !ok {
			missing++
			if missing >= maxMissing || !inst.Created {
				return false, fmt.Errorf("%s is not in `brev ls` (%d looks)", inst.Ref, missing)
			}
			return false, nil
		}
		missing, last = 0, w
		if w.Status == statusRunning || w.Status == statusUnhealthy {
			return true, nil
		}
		if err := unusable(w, inst.Created); err != nil {
			return false, err
		}
		b.progress(inst.Name, fmt.Sprintf("%s (%s)", orUnknown(w.Status), since(start)))
		return false, nil
	})
	if errors.Is(err, errDeadline) {
		return last, fmt.Errorf("%s stuck in %s for %s (the create timeout is %v)", inst.Ref, orUnknown(last.Status), since(start), b.cfg.CreateTimeout)
	}
	return last, err
}

func orUnknown(status string) string {
	if status == "" {
		return "an empty status"
	}
	return status
}

// ready runs `brev refresh`, which writes the instance's ssh alias, then
// probes inst until it answers or deadline passes.
func (b *Brev) ready(ctx context.Context, inst platform.Instance, start, deadline time.Time) error {
	b.progress(inst.Name, fmt.Sprintf("RUNNING; brev refresh (%s)", since(start)))
	for try := 1; ; try++ {
		err := b.refresh(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || try == maxLsFailures || !time.Now().Before(deadline) {
			return fmt.Errorf("brev refresh: %w", err)
		}
		if err := sleep(ctx, b.cfg.PollInterval); err != nil {
			return fmt.Errorf("brev refresh: %w", err)
		}
	}
	for try := 1; ; try++ {
		err := b.probe(ctx, inst)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || b.closed.Load() {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s is RUNNING but did not answer `echo ok` within %s (%d tries): %w", inst.Ref, since(start), try, err)
		}
		b.progress(inst.Name, fmt.Sprintf("waiting for ssh (%s, try %d)", since(start), try))
		if err := sleep(ctx, min(b.cfg.PollInterval, left)); err != nil {
			return fmt.Errorf("waiting for %s to answer: %w", inst.Ref, err)
		}
	}
}

// refresh runs `brev refresh`, one at a time per Brev: concurrent runs
// rewrite the same ~/.brev/ssh_config.
func (b *Brev) refresh(ctx context.Context) error {
	select {
	case b.refreshSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting to run brev refresh: %w", context.Cause(ctx))
	}
	defer func() { <-b.refreshSem }()
	_, err := b.call(ctx, "refresh")
	return err
}

// probe runs `echo ok` on inst through the transport; it answers when the
// output is exactly "ok".
func (b *Brev) probe(ctx context.Context, inst platform.Instance) error {
	pctx, cancel := context.WithTimeoutCause(ctx, b.cfg.CallTimeout, fmt.Errorf("the probe did not finish within %v", b.cfg.CallTimeout))
	defer cancel()
	res, err := b.Exec(pctx, inst, "echo ok", nil)
	switch {
	case err != nil:
		return err
	case res.ExitCode != 0 || strings.TrimSuffix(string(res.Stdout), "\n") != "ok":
		return fmt.Errorf("`echo ok` exited %d and printed %q", res.ExitCode, b.cfg.Redactor.Clip(string(res.Stdout), 200))
	}
	return nil
}

// abandon deletes what a failed Create may have left behind, on a context
// that the cancellation of ctx does not end, and returns cause with what
// became of the instance. createFailed says brev create itself failed.
func (b *Brev) abandon(ctx context.Context, inst platform.Instance, cause error, createFailed bool) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.DeleteBound())
	defer cancel()
	what := fmt.Sprintf("create brev instance %s (%s)", inst.Name, inst.Ref)
	b.progress(inst.Name, "failed; cleaning up")
	ws, err := b.lsRetry(cctx)
	if err != nil {
		return fmt.Errorf("%s: %w; then could not tell whether it exists (%w): look with `brev ls` and delete it with `brev delete %s`", what, cause, err, inst.Ref)
	}
	w, ok := find(ws, inst.Ref)
	switch {
	case !ok:
		return fmt.Errorf("%s: %w; no instance was left behind", what, cause)
	case w.Status == statusDeleting:
		return fmt.Errorf("%s: %w; it is already being deleted", what, cause)
	}
	b.closeMaster(cctx, inst.Ref)
	note := "deleted"
	if createFailed {
		note = fmt.Sprintf("brev made it anyway (an orphan, status %s): deleted", orUnknown(w.Status))
	}
	if err := b.deleteAndWait(cctx, inst.Ref); err != nil {
		return fmt.Errorf("%s: %w; it exists (status %s) and deleting it failed: %w", what, cause, orUnknown(w.Status), err)
	}
	return fmt.Errorf("%s: %w; %s", what, cause, note)
}

// DeleteBound is the most a Delete or Stop takes (platform.DeleteBounder):
// its wait (DeleteTimeout) and its brev calls, each bounded by CallTimeout.
func (b *Brev) DeleteBound() time.Duration {
	return b.cfg.DeleteTimeout + (deleteTries+maxLsFailures+2)*b.cfg.CallTimeout
}

// Delete deletes an instance this run created, and waits until `brev ls`
// shows it DELETING or no more (at most DeleteTimeout). An instance that
// is already gone ("not found") counts as deleted. Other failures of `brev
// delete` are tried again, up to three tries. Delete refuses an instance
// with Created false: taoflow never deletes an instance it did not create.
func (b *Brev) Delete(ctx context.Context, inst platform.Instance) error {
	if err := owned(inst, "delete"); err != nil {
		return err
	}
	if _, err := b.Check(ctx); err != nil {
		return err
	}
	b.closeMaster(ctx, inst.Ref)
	if err := b.deleteAndWait(ctx, inst.Ref); err != nil {
		return fmt.Errorf("delete brev instance %s (%s): %w", inst.Name, inst.Ref, err)
	}
	return nil
}

// owned refuses to act (verb) on an instance this run did not create, or
// whose name is not one that taoflow gives.
func owned(inst platform.Instance, verb string) error {
	if !inst.Created {
		return fmt.Errorf("brev instance %s (%s) was not created by this run: taoflow never will %s an instance it did not create", inst.Name, inst.Ref, verb)
	}
	if !strings.HasPrefix(inst.Ref, Prefix) || !validName(inst.Ref) {
		return fmt.Errorf("brev instance %s: refusing to %s %q: the instances taoflow creates are named %s…", inst.Name, verb, inst.Ref, Prefix)
	}
	return nil
}

// deleteAndWait runs `brev delete -- name` (up to deleteTries times) and
// waits for the instance to be DELETING or gone.
func (b *Brev) deleteAndWait(ctx context.Context, name string) error {
	var err error
	for try := 1; try <= deleteTries; try++ {
		_, err = b.call(ctx, "delete", "--", name)
		if err == nil || says(err, "not found") || ctx.Err() != nil {
			break
		}
		if try < deleteTries {
			if serr := sleep(ctx, b.cfg.PollInterval<<(try-1)); serr != nil {
				return fmt.Errorf("%w (then: %w)", err, serr)
			}
		}
	}
	switch {
	case says(err, "not found"):
		return nil // deleted already
	case ctx.Err() != nil:
		return err
	case err != nil:
		// An instance being deleted is deleted, whatever brev delete
		// answered for it (the API may refuse a second delete).
		if ws, lerr := b.lsRetry(ctx); lerr == nil {
			if w, ok := find(ws, name); !ok || w.Status == statusDeleting {
				return nil
			}
		}
		return fmt.Errorf("brev delete failed %d times: %w; delete it with `brev delete %s`", deleteTries, err, name)
	}
	start := time.Now()
	var last Workspace
	err = b.poll(ctx, start.Add(b.cfg.DeleteTimeout), func(ws []Workspace) (bool, error) {
		w, ok := find(ws, name)
		last = w
		return !ok || w.Status == statusDeleting, nil
	})
	if errors.Is(err, errDeadline) {
		return fmt.Errorf("%s is still %s %s after brev delete: check `brev ls` and delete it with `brev delete %s`", name, orUnknown(last.Status), since(start), name)
	}
	return err
}

// Stop stops an instance this run created, keeping its disk, and waits
// until `brev ls` shows it STOPPING or STOPPED (at most DeleteTimeout). An
// instance brev does not know is an error wrapping platform.ErrNotFound.
// Like Delete, Stop refuses an instance with Created false. An instance
// whose type cannot be stopped (Attrs "stoppable" false, or brev saying
// so) is an error wrapping platform.ErrNotStoppable, and brev stop is not
// run for one known to be so.
func (b *Brev) Stop(ctx context.Context, inst platform.Instance) error {
	if err := owned(inst, "stop"); err != nil {
		return err
	}
	if inst.Attrs["stoppable"] == "false" {
		return fmt.Errorf("stop brev instance %s (%s): type %s: %w", inst.Name, inst.Ref, inst.Attrs["type"], platform.ErrNotStoppable)
	}
	if _, err := b.Check(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("stop brev instance %s (%s)", inst.Name, inst.Ref)
	b.closeMaster(ctx, inst.Ref)
	if _, err := b.call(ctx, "stop", "--", inst.Ref); err != nil {
		switch {
		case says(err, "not found"):
			return fmt.Errorf("%s: %w (%w)", what, platform.ErrNotFound, err)
		case says(err, "does not support stop"):
			return fmt.Errorf("%s: %w (%w)", what, platform.ErrNotStoppable, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	start := time.Now()
	var last Workspace
	err := b.poll(ctx, start.Add(b.cfg.DeleteTimeout), func(ws []Workspace) (bool, error) {
		w, ok := find(ws, inst.Ref)
		if !ok {
			return false, fmt.Errorf("it is no longer in `brev ls`: %w", platform.ErrNotFound)
		}
		last = w
		return w.Status == statusStopping || w.Status == statusStopped, nil
	})
	if errors.Is(err, errDeadline) {
		return fmt.Errorf("%s: still %s %s after brev stop", what, orUnknown(last.Status), since(start))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
