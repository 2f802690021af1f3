package steps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/platform"
)

// cancelGrace bounds the cancel of a job once the context that waited for
// it is gone (Ctrl-C, a step timeout).
const cancelGrace = 15 * time.Second

// maxPollFailures is how many polls in a row may fail (the instance did
// not answer) before a wait gives up on its jobs.
const maxPollFailures = 10

var jobIDRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// run launches the node's job, or adopts it when it exists already.
func (s *Steps) run(ctx context.Context, req Request) error {
	spec, rt, noun, err := s.jobSpecFor(req)
	if err != nil {
		return err
	}
	fmt.Fprintf(req.Log, "launching %s %s on %s\n", noun, spec.ID, req.Instance.Name)
	l, err := rt.submit(ctx, req.Instance, spec)
	if err != nil {
		return err
	}
	if l.Adopted {
		fmt.Fprintf(req.Log, "adopted existing %s %s (%s)\n", noun, spec.ID, l.Ref)
	} else {
		fmt.Fprintf(req.Log, "launched %s %s (%s)\n", noun, spec.ID, l.Ref)
	}
	return nil
}

// jobSpecFor reads and checks the job of a run step's request: its spec,
// the runtime that runs it and what to call it ("job" or "container").
func (s *Steps) jobSpecFor(req Request) (jobSpec, runtime, string, error) {
	image := withString(req.With, "image")
	rt := s.runtimeFor(image)
	if !jobIDRE.MatchString(req.JobID) {
		return jobSpec{}, nil, "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("job id %q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", req.JobID)}
	}
	if err := confinedPaths(req, "volumes", "results", "workdir"); err != nil {
		return jobSpec{}, nil, "", err
	}
	spec := jobSpec{
		ID:       req.JobID,
		Instance: req.Instance.Name,
		Command:  withString(req.With, "command"),
		Workdir:  withString(req.With, "workdir"),
		Env:      withList(req.With, "env"),
		Image:    image,
		GPUs:     withString(req.With, "gpus"),
		Volumes:  withList(req.With, "volumes"),
		IPC:      withString(req.With, "ipc"),
		ShmSize:  withString(req.With, "shm_size"),
		Memory:   withString(req.With, "memory"),
		User:     withString(req.With, "user"),
	}
	if err := slotDevices(req, &spec); err != nil {
		return jobSpec{}, nil, "", err
	}
	if image == "" {
		if spec.Command == "" {
			return jobSpec{}, nil, "", &Error{Class: ClassInvalidConfig, Msg: "a run step without image needs with.command"}
		}
		return spec, rt, "job", nil
	}
	if err := checkContainerSpec(spec); err != nil {
		return jobSpec{}, nil, "", err
	}
	return spec, rt, "container", nil
}

// watched is one job a wait step follows.
type watched struct {
	job      Job
	inst     platform.Instance
	rt       runtime
	label    string // prefix of its log lines and progress ("" for a lone job)
	offset   int64  // log bytes seen
	partial  []byte // an unfinished last log line
	progress string
	// statusTail is the last few status.json lines taken as points; the
	// next poll takes the lines after them (newStatusLines). statusSeen
	// is the hash of the last of them (lineHash), recorded so that a
	// resumed wait takes only the lines after it.
	statusTail []string
	statusSeen string
	// fromStatus: status.json has given points, so output lines give
	// none (a TAO job prints what it writes there).
	fromStatus bool
	points     []progress.Point // from output lines, since the last report
	note       string           // the last Note logged
	age        time.Duration
	ended      bool  // terminal and its log read to the end
	err        error // its outcome once ended
}

// wait follows req.Jobs until every one has ended, streaming their logs.
func (s *Steps) wait(ctx context.Context, req Request) error {
	interval, err := withDuration(req.With, "interval", s.cfg.PollInterval)
	if err != nil {
		return err
	}
	timeout, err := withDuration(req.With, "timeout", 0)
	if err != nil {
		return err
	}
	if len(req.Jobs) == 0 {
		return &Error{Class: ClassInvalidConfig, Msg: "a wait step needs the jobs of a run step (needs: a run step)"}
	}
	ws := make([]*watched, len(req.Jobs))
	for i, j := range req.Jobs {
		w := &watched{job: j, inst: j.Instance, rt: s.runtimeFor(j.Image)}
		if w.inst.Name == "" {
			w.inst = req.Instance
		}
		if len(req.Jobs) > 1 {
			w.label = "[" + j.ID + "] "
		}
		ws[i] = w
	}
	if req.Attempt > 1 && s.onSlurm() {
		if err := s.slurmResubmit(ctx, req, ws); err != nil {
			return err
		}
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.job.ID
	}
	wake, release := s.follow(ws)
	defer release()
	followed := ""
	if wake != nil {
		followed = ", and at once when one ends"
	}
	fmt.Fprintf(req.Log, "waiting for %s (poll every %s%s)\n", strings.Join(names, ", "), interval, followed)
	offsets := s.priorOffsets(req, ws)
	seen := priorStatusSeen(req, ws)
	start := time.Now()
	// The wait's timeout runs on a timer of its own: a poll that never
	// answers (a hung instance) cannot hold it off.
	wctx, stopTimer := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, stopTimer = context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
	}
	defer stopTimer()
	failures := 0
	var gpuHours string // the GPU-hours last recorded (slurm.go)
	asked := false      // the platform was asked where the instance is, since the last poll that answered
	for {
		more, lost, err := s.pollOnce(wctx, req, ws, interval)
		if ctx.Err() != nil {
			return s.abandon(ctx, req, ws)
		}
		offsets = recordOffsets(req, ws, offsets)
		seen = recordStatusSeen(req, ws, seen)
		gpuHours = s.recordGPUHours(req, ws, gpuHours)
		if err != nil && wctx.Err() == nil {
			failures++
			fmt.Fprintf(req.Log, "poll failed (%d of %d in a row): %s\n", failures, maxPollFailures, s.redact.Redact(err.Error()))
			if lost != nil && !asked {
				// A lost connection may be an instance that is gone or
				// stopped: the platform says so at once, where ten more
				// polls would take minutes (and bill).
				asked = true
				if where := s.whereIs(ctx, *lost, interval); where != nil {
					recordGone(req, lost.Name, time.Now())
					return s.fail(ClassNotReachable, where, "lost contact with the jobs: %v", where)
				}
			}
			if failures >= maxPollFailures {
				return s.fail(ClassNotReachable, err, "lost contact with the jobs after %d failed polls: %v", failures, err)
			}
		} else if err == nil {
			failures, asked = 0, false
		}
		if done, err := outcome(ws); done {
			s.recordMetrics(ctx, req, ws)
			return err
		}
		if timeout > 0 {
			late := overdue(ws, time.Since(start), timeout)
			if late == nil && wctx.Err() != nil {
				late = firstRunning(ws)
			}
			if late != nil {
				return s.timedOut(ctx, req, ws, late, timeout)
			}
		}
		if more && err == nil {
			continue // read the rest of a log at once
		}
		every := interval
		if s.onSlurm() {
			every = slurmPause(interval)
		}
		if !pause(wctx, every, wake) {
			if ctx.Err() != nil {
				return s.abandon(ctx, req, ws)
			}
			return s.timedOut(ctx, req, ws, firstRunning(ws), timeout)
		}
	}
}

// errWaitTimeout is the cause of a wait's context when its timeout ends it.
var errWaitTimeout = errors.New("the wait's timeout ended")

// minPollTimeout is the least time one poll of a wait may take before it
// counts as failed; pollTimeout is a few intervals when those are longer.
const minPollTimeout = time.Minute

// pollTimeout bounds one poll of a wait that polls every interval.
func pollTimeout(interval time.Duration) time.Duration {
	return max(3*interval, minPollTimeout)
}

// pollOnce is one poll of the wait's jobs, with a deadline of its own
// (pollTimeout, and never past ctx's): a poll that hits it failed. lost is
// the instance whose poll failed as a lost connection would (a transport
// error, or no answer in time), nil when none did.
func (s *Steps) pollOnce(ctx context.Context, req Request, ws []*watched, interval time.Duration) (more bool, lost *platform.Instance, err error) {
	d := pollTimeout(interval)
	pctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("the poll did not answer within %s", d))
	defer cancel()
	more, failed, err := s.observe(pctx, req, ws)
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		err = context.Cause(pctx)
	}
	var ee *platform.ExecError
	if failed != nil && (errors.As(err, &ee) || pctx.Err() != nil) {
		lost = failed
	}
	return more, lost, err
}

// whereIs asks the platform (platform.Finder), within a poll's deadline,
// whether inst is still there to run commands on. It returns an error
// wrapping platform.ErrNotFound or platform.ErrStopped when it is gone or
// stopped, and nil when it may be there or the platform cannot tell.
func (s *Steps) whereIs(ctx context.Context, inst platform.Instance, interval time.Duration) error {
	f, ok := s.cfg.Platform.(platform.Finder)
	if !ok || inst.Ref == "" {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, pollTimeout(interval))
	defer cancel()
	err := f.Find(fctx, inst)
	if errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrStopped) {
		return err
	}
	return nil
}

// recordGone records that the platform said instance was gone or
// stopped at t (RecordGoneAt), so that its billing figure ends there.
func recordGone(req Request, instance string, t time.Time) {
	if req.Record == nil {
		return
	}
	gone := map[string]string{}
	_ = json.Unmarshal([]byte(req.Facts[RecordGoneAt]), &gone)
	if _, ok := gone[instance]; ok {
		return
	}
	gone[instance] = t.UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(gone)
	req.Record(RecordGoneAt, string(b))
}

// firstRunning is the first job that has not ended, nil when all have.
func firstRunning(ws []*watched) *watched {
	for _, w := range ws {
		if !w.ended {
			return w
		}
	}
	return nil
}

// priorOffsets starts each job's log where an earlier attempt of this
// node (before a crash and --resume) stopped writing it to the node log, so
// the lines before are not written twice. It returns the offsets as
// recorded.
func (s *Steps) priorOffsets(req Request, ws []*watched) map[string]int64 {
	offsets := map[string]int64{}
	raw := req.Facts[RecordLogOffsets]
	if raw == "" {
		return offsets
	}
	if err := json.Unmarshal([]byte(raw), &offsets); err != nil {
		fmt.Fprintf(req.Log, "reading the jobs' logs from the start (the recorded offsets are unreadable: %v)\n", err)
		return map[string]int64{}
	}
	for _, w := range ws {
		if n := offsets[w.job.ID]; n > 0 {
			w.offset = n
			fmt.Fprintf(req.Log, "%sjob %s: its log continues after the %d bytes written here before\n", w.label, w.job.ID, n)
		}
	}
	return offsets
}

// recordOffsets records how much of each job's log the node log holds
// (complete lines only) when that changed since last, and returns what
// it recorded.
func recordOffsets(req Request, ws []*watched, last map[string]int64) map[string]int64 {
	if req.Record == nil {
		return last
	}
	now := make(map[string]int64, len(ws))
	changed := false
	for _, w := range ws {
		n := w.offset - int64(len(w.partial))
		now[w.job.ID] = n
		changed = changed || last[w.job.ID] != n
	}
	if !changed {
		return last
	}
	b, err := json.Marshal(now)
	if err != nil {
		return last
	}
	req.Record(RecordLogOffsets, string(b))
	return now
}

// observe polls every job that has not ended, one Exec per instance, and
// streams what it learns to the log and progress. It reports whether some
// log has bytes left to read, and the first poll that failed: its error
// and instance.
func (s *Steps) observe(ctx context.Context, req Request, ws []*watched) (more bool, failed *platform.Instance, err error) {
	var firstErr error
	for _, group := range byRuntime(ws) {
		probes := make([]probe, len(group))
		for i, w := range group {
			probes[i] = probe{ID: w.job.ID, Offset: w.offset, Results: w.job.Results}
		}
		obs, err := group[0].rt.status(ctx, group[0].inst, probes)
		if err != nil {
			if firstErr == nil {
				firstErr, failed = err, &group[0].inst
			}
			if ctx.Err() != nil {
				return false, failed, firstErr
			}
			continue
		}
		for i, w := range group {
			o := obs[i]
			w.age = o.Age
			s.streamLog(req, w, o.Log)
			w.offset += int64(len(o.Log))
			more = more || o.More
			if o.Note != w.note {
				w.note = o.Note
				if o.Note != "" {
					fmt.Fprintf(req.Log, "%sjob %s: %s\n", w.label, w.job.ID, s.redact.Redact(o.Note))
				}
			}
			pts := s.statusPoints(w, o.StatusLines)
			if w.fromStatus {
				w.points = nil
			}
			pts = append(pts, w.points...)
			w.points = nil
			now := time.Now().UTC()
			for i := range pts {
				pts[i].Job, pts[i].Time = w.job.ID, now
			}
			if p := progressLine(o.Status, s.redact); p.Line != "" && p.Line != w.progress {
				w.progress = p.Line
				if w.label != "" {
					p.Line, p.Figures.Job = w.label+p.Line, w.job.ID
				}
				p.Points = pts
				req.Progress(p)
			} else if len(pts) > 0 {
				req.Progress(progress.Report{Points: pts})
			}
			if o.State != stateRunning && !o.More {
				w.ended = true
				s.flushLog(req, w)
				w.err = s.jobOutcome(w, o)
			}
		}
	}
	return more, failed, firstErr
}

// statusTailLen is how many status.json lines a wait remembers to find
// where the new ones start.
const statusTailLen = 4

// statusPoints returns the points of the status.json lines of lines (the
// end of the file, its first line maybe cut) that come after those w took
// before, and remembers the last of them.
func (s *Steps) statusPoints(w *watched, lines []string) []progress.Point {
	fresh := newStatusLines(w.statusTail, lines)
	if len(w.statusTail) == 0 && w.statusSeen != "" {
		// Resumed: the lines after the last one an earlier attempt took.
		for j := len(lines) - 1; j >= 0; j-- {
			if lineHash(lines[j]) == w.statusSeen {
				fresh = lines[j+1:]
				break
			}
		}
	}
	if len(lines) > 0 {
		w.statusTail = append([]string(nil), lines[max(len(lines)-statusTailLen, 0):]...)
		w.statusSeen = lineHash(lines[len(lines)-1])
	}
	if len(fresh) == 0 {
		return nil
	}
	var pts []progress.Point
	for _, l := range fresh {
		pts = append(pts, progressLine(l, s.redact).Points...)
	}
	if len(pts) > 0 {
		w.fromStatus = true
	}
	return pts
}

// lineHash names a status.json line without holding its text (which may
// hold what the redactor would change): its sha256, hex.
func lineHash(line string) string {
	h := sha256.Sum256([]byte(line))
	return hex.EncodeToString(h[:])
}

// priorStatusSeen reads what an earlier attempt of this wait recorded of
// the status.json lines it took (RecordStatusSeen) into each job.
func priorStatusSeen(req Request, ws []*watched) map[string]string {
	seen := map[string]string{}
	if raw := req.Facts[RecordStatusSeen]; raw == "" || json.Unmarshal([]byte(raw), &seen) != nil {
		return map[string]string{}
	}
	for _, w := range ws {
		w.statusSeen = seen[w.job.ID]
	}
	return seen
}

// recordStatusSeen records the hash of the last status.json line each job
// gave when that changed since last, and returns what it recorded.
func recordStatusSeen(req Request, ws []*watched, last map[string]string) map[string]string {
	if req.Record == nil {
		return last
	}
	now := make(map[string]string, len(ws))
	changed := false
	for _, w := range ws {
		if w.statusSeen != "" {
			now[w.job.ID] = w.statusSeen
			changed = changed || last[w.job.ID] != w.statusSeen
		}
	}
	if !changed {
		return last
	}
	b, err := json.Marshal(now)
	if err != nil {
		return last
	}
	req.Record(RecordStatusSeen, string(b))
	return now
}

// newStatusLines returns the lines of lines after the last place where
// tail (the last lines taken before) ends: all of them when tail is not
// found (a first poll, or more new lines than the window holds), where
// the window's start may cut tail short.
func newStatusLines(tail, lines []string) []string {
	if len(tail) == 0 {
		return lines
	}
	for j := len(lines) - 1; j >= 0; j-- {
		match := true
		for k := 0; k < len(tail) && j-k >= 0; k++ {
			if lines[j-k] != tail[len(tail)-1-k] {
				match = false
				break
			}
		}
		if match {
			return lines[j+1:]
		}
	}
	return lines
}

// maxPartial bounds the unfinished last line a wait holds back: output
// without line ends (a progress bar redrawn with \r, a binary blob) is
// passed on in pieces instead of held, and copied, whole.
const maxPartial = 64 << 10

// streamLog writes the complete lines of b (after what was held back) to
// the node log, holding back an unfinished last line of at most
// maxPartial bytes. A line ends at \n or \r.
func (s *Steps) streamLog(req Request, w *watched, b []byte) {
	if len(b) == 0 {
		return
	}
	w.partial = append(w.partial, b...)
	if cut := bytes.LastIndexAny(w.partial, "\n\r") + 1; cut > 0 {
		s.writeLines(req, w, w.partial[:cut])
		w.partial = append([]byte(nil), w.partial[cut:]...)
	}
	if len(w.partial) > maxPartial {
		// Redact before cutting the line, and keep the last MaxLen bytes
		// back: a secret that is not whole yet lies within them, so no
		// piece passed on holds part of one.
		red := s.redact.RedactBytes(w.partial)
		cut := max(len(red)-s.redact.MaxLen(), 0)
		if cut > 0 {
			s.writeLines(req, w, append(red[:cut:cut], '\n'))
			w.partial = append([]byte(nil), red[cut:]...)
		}
	}
}

// flushLog writes an unfinished last line, ended with a newline.
func (s *Steps) flushLog(req Request, w *watched) {
	if len(w.partial) > 0 {
		s.writeLines(req, w, append(w.partial, '\n'))
		w.partial = nil
	}
}

func (s *Steps) writeLines(req Request, w *watched, b []byte) {
	if len(b) == 0 {
		return
	}
	if !w.fromStatus {
		for line := range bytes.FieldsFuncSeq(b, func(r rune) bool { return r == '\n' || r == '\r' }) {
			// A cheap look first: most output lines hold no counter.
			if low := bytes.ToLower(line); len(line) <= 1024 && (bytes.Contains(low, []byte("epoch")) || bytes.Contains(low, []byte("step")) || bytes.Contains(low, []byte("iter"))) {
				for _, p := range progress.ParseLine(string(line)) {
					p.Metric = s.redact.Redact(oneLine(p.Metric))
					w.points = append(w.points, p)
				}
			}
		}
	}
	if w.label == "" {
		_, _ = req.Log.Write(b)
		return
	}
	var out []byte
	for len(b) > 0 {
		end := bytes.IndexAny(b, "\n\r") + 1
		if end == 0 {
			end = len(b)
		}
		out = append(append(out, w.label...), b[:end]...)
		b = b[end:]
	}
	_, _ = req.Log.Write(out)
}

// jobOutcome maps how a job ended to nil or an *Error.
func (s *Steps) jobOutcome(w *watched, o observation) error {
	id, inst := w.job.ID, w.inst.Name
	if o.Fail != nil && o.State != stateRunning {
		return o.Fail
	}
	switch o.State {
	case stateExited:
		switch {
		case o.Canceled && (o.Code == 137 || o.Code == 143):
			return &Error{Class: ClassCanceled, Code: o.Code, Msg: fmt.Sprintf("job %s was canceled", id)}
		case strings.HasPrefix(o.Reason, reasonStartFailed):
			return s.failCode(ClassLaunchFailed, o.Code, "job %s did not start: %s", id, o.Reason)
		case o.Reason == reasonOOM:
			return &Error{Class: ClassJobFailed, Code: o.Code, Msg: fmt.Sprintf("job %s failed: oom (its container ran out of memory; exit code %d)", id, o.Code)}
		case o.Code == 0:
			return nil
		case o.Code < 0:
			return &Error{Class: ClassJobFailed, Code: 255, Msg: fmt.Sprintf("job %s ended, but its exit code is unreadable", id)}
		}
		return &Error{Class: ClassJobFailed, Code: o.Code, Msg: fmt.Sprintf("job %s exited with code %d", id, o.Code)}
	case stateVanished:
		if o.Canceled {
			return &Error{Class: ClassCanceled, Msg: fmt.Sprintf("job %s was canceled", id)}
		}
		if o.Reason != "" {
			return s.fail(ClassVanished, nil, "job %s on %s: %s", id, inst, o.Reason)
		}
		return &Error{Class: ClassVanished, Msg: fmt.Sprintf("job %s on %s is gone: its process ended without an exit code (killed from outside, or the instance restarted)", id, inst)}
	case stateMissing:
		return &Error{Class: ClassVanished, Msg: fmt.Sprintf("job %s is not on %s (no job directory)", id, inst)}
	case stateRunning:
	}
	return nil
}

// failCode is fail with an exit code.
func (s *Steps) failCode(class string, code int, format string, args ...any) *Error {
	e := s.fail(class, nil, format, args...)
	e.Code = code
	return e
}

// byRuntime groups the jobs that have not ended by instance and runtime, in
// job order, so that each group is one round trip.
func byRuntime(ws []*watched) [][]*watched {
	type key struct {
		inst string
		rt   runtime
	}
	var groups [][]*watched
	index := map[key]int{}
	for _, w := range ws {
		if w.ended {
			continue
		}
		k := key{w.inst.Name, w.rt}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], w)
	}
	return groups
}

// outcome reports whether every job has ended and, if so, the first
// failure in job order.
func outcome(ws []*watched) (bool, error) {
	for _, w := range ws {
		if !w.ended {
			return false, nil
		}
	}
	for _, w := range ws {
		if w.err != nil {
			return true, w.err
		}
	}
	return true, nil
}

// overdue returns a running job that has run at least timeout: the longer
// of the wait's own time and the job's age on the instance, so a resumed
// wait counts the time before it.
func overdue(ws []*watched, waited, timeout time.Duration) *watched {
	for _, w := range ws {
		if !w.ended && max(waited, w.age) >= timeout {
			return w
		}
	}
	return nil
}

// stopAll cancels every job that has not ended, on ctx, and logs what the
// runtime did; a final poll then collects their last log lines, and jobs
// of a runtime that keeps them (a remover: containers) are removed after.
func (s *Steps) stopAll(ctx context.Context, req Request, ws []*watched) error {
	var firstErr error
	groups := byRuntime(ws)
	for _, group := range groups {
		lines, err := group[0].rt.cancel(ctx, group[0].inst, groupIDs(group))
		for _, l := range lines {
			fmt.Fprintln(req.Log, l)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for range 3 { // collect the last log lines
		more, _, err := s.observe(ctx, req, ws)
		if err != nil || !more {
			break
		}
	}
	for _, w := range ws {
		s.flushLog(req, w)
	}
	for _, group := range groups {
		r, ok := group[0].rt.(remover)
		if !ok {
			continue
		}
		lines, err := r.remove(ctx, group[0].inst, groupIDs(group))
		for _, l := range lines {
			fmt.Fprintln(req.Log, l)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func groupIDs(group []*watched) []string {
	ids := make([]string, len(group))
	for i, w := range group {
		ids[i] = w.job.ID
	}
	return ids
}

// abandon cancels the jobs when ctx is done (Ctrl-C, a step timeout) on a
// fresh short context, and returns ctx's cause.
func (s *Steps) abandon(ctx context.Context, req Request, ws []*watched) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	fmt.Fprintf(req.Log, "canceling: %v\n", context.Cause(ctx))
	if err := s.stopAll(cctx, req, ws); err != nil {
		fmt.Fprintf(req.Log, "could not cancel every job: %s\n", s.redact.Redact(err.Error()))
	}
	return context.Cause(ctx)
}

// timedOut cancels the jobs because late ran past with.timeout.
func (s *Steps) timedOut(ctx context.Context, req Request, ws []*watched, late *watched, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	fmt.Fprintf(req.Log, "job %s ran longer than %s; canceling\n", late.job.ID, timeout)
	err := s.stopAll(cctx, req, ws)
	msg := fmt.Sprintf("job %s ran longer than %s; canceled it", late.job.ID, timeout)
	if err != nil {
		msg += fmt.Sprintf(" (the cancel failed: %v)", err)
	}
	return s.fail(ClassTimedOut, err, "%s", msg)
}
