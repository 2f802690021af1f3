package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// The slurm runtime runs a `run` node as one sbatch job on a Slurm cluster
// (docs/design.md §6.3). A job's directory, WORKDIR/RUN/JOB on the
// cluster's shared filesystem, holds
//
//	cmd.sh    the command text
//	job.sh    the batch script (also what sbatch got on stdin)
//	env       the job's secrets, NAME=VALUE lines, 0600; removed at teardown
//	id        the Slurm job id
//	run, pool the run id and the pool (the plan's instance)
//	log       the job's output (sbatch --output)
//	rc        the command's exit code, written when it ends
//	canceled  present when taoflow cancelled the job
//
// and the run's directory holds events, where each batch script appends
// "@end JOB" as it ends: the pool's watcher (watch.go) follows it and wakes
// that job's wait.
//
// Every job is its own sbatch (no job array): a cell is a node of its own
// in taoflow's graph, placed, retried, adopted and cancelled on its own,
// and slots keep at most that many of a pool's jobs queued, so an array's
// one submission would save little (docs/benchmarks.md has the figures).
type slurmRT struct {
	s *Steps

	// The waits of a pool poll at the same instants (slurmPause), and
	// those that poll within gatherWindow of each other share one squeue:
	// next is, by pool, the batch gathering their probes.
	mu   sync.Mutex
	next map[string]*slurmBatch
}

// gatherWindow is how long the first wait of a poll waits for the others
// of its pool to join its squeue.
const gatherWindow = 50 * time.Millisecond

// slurmBatch is one status round trip shared by the waits of a pool.
type slurmBatch struct {
	probes []probe
	done   chan struct{}
	obs    []observation
	err    error
}

var _ runtime = (*slurmRT)(nil)

// Exit codes of the slurm scripts.
const (
	exitSlurmJobDir = 90 // cannot write the job directory
	exitSbatch      = 93 // sbatch refused the job
	exitPyxis       = 94 // an image, and no pyxis
	exitSqueue      = 95 // squeue failed
	exitNoEnroot    = 96 // pull, and no enroot on the login node
)

// onSlurm reports whether the run's platform is a Slurm cluster.
func (s *Steps) onSlurm() bool {
	if s.cfg.Platform != nil {
		return s.cfg.Platform.Kind() == plan.PlatformSlurm
	}
	// taoflow plan previews without a platform.
	return s.cfg.Plan != nil && s.cfg.Plan.Platform.Kind == plan.PlatformSlurm
}

// slurmWorkdir is the directory that holds each run's job directories:
// the plan's platform.workdir, else the platform's (destroy has no plan),
// else the default.
func (s *Steps) slurmWorkdir() string {
	if p := s.cfg.Plan; p != nil && p.Platform.Slurm.Workdir != "" {
		return strings.TrimRight(p.Platform.Slurm.Workdir, "/")
	}
	if w, ok := s.cfg.Platform.(interface{ Workdir() string }); ok && w.Workdir() != "" {
		return strings.TrimRight(w.Workdir(), "/")
	}
	return plan.DefaultSlurmWorkdir
}

// runDir is the run's directory under the workdir.
func (r *slurmRT) runDir() string { return r.s.slurmWorkdir() + "/" + r.s.cfg.RunID }

// SlurmComment is the --comment of every job of run in pool: cleanup
// finds a job that no state recorded by it.
func SlurmComment(run, pool string) string { return "taoflow run=" + run + " pool=" + pool }

// SbatchArgs returns sbatch's options for job in pool of run, as they go
// on its command line (no secret ever does; the script goes on stdin):
// the job name, the run's comment, and the pool's shape.
func SbatchArgs(run, job string, pool *plan.Instance) []string {
	args := []string{"--parsable", "--job-name=" + job, "--comment=" + SlurmComment(run, pool.Name), "--open-mode=append"}
	p := pool.Pool
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag+"="+v)
		}
	}
	add("--partition", p.Partition)
	add("--account", p.Account)
	add("--qos", p.QOS)
	if p.CPUs > 0 {
		add("--cpus-per-task", strconv.Itoa(p.CPUs))
	}
	add("--mem", p.Mem)
	if p.Minutes > 0 {
		add("--time", strconv.Itoa(p.Minutes))
	}
	add("--constraint", p.Constraint)
	if pool.GPUs > 0 {
		add("--gpus", strconv.Itoa(pool.GPUs))
	}
	return args
}

// SrunContainer returns the srun line (before the command's own words)
// that runs a job's command in image through pyxis.
func SrunContainer(image, workdir string, volumes []string) []string {
	args := []string{"srun", "--container-image=" + image}
	if len(volumes) > 0 {
		args = append(args, "--container-mounts="+strings.Join(volumes, ","))
	}
	if workdir != "" {
		args = append(args, "--container-workdir="+workdir)
	}
	return args
}

// pool returns the plan's pool of inst, or a bare one (Slurm's defaults)
// when there is no plan.
func (r *slurmRT) pool(inst platform.Instance) *plan.Instance {
	if p := r.s.cfg.Plan; p != nil {
		if in := p.Instance(inst.Name); in != nil {
			return in
		}
	}
	return &plan.Instance{Name: inst.Name}
}

// batchScript is the batch script of spec. It starts in the job's
// directory (sbatch --chdir), which it reads as $PWD.
func (r *slurmRT) batchScript(spec jobSpec) string {
	srun := ""
	if spec.Image != "" {
		srun = words(SrunContainer(spec.Image, spec.Workdir, spec.Volumes)...) + " " + spec.Command
	}
	workdir := spec.Workdir
	if spec.Image != "" {
		workdir = "" // the container's, given to srun
	}
	sqsh := ""
	if spec.Image != "" {
		sqsh = r.sqshPath(spec.Image)
	}
	return "#!/bin/sh\n# taoflow job " + spec.ID + "\n" + script(Params{"tf_workdir": workdir, "tf_srun": srun, "tf_sqsh": sqsh}, "home", "slurm-job")
}

// sqshPath is the squashfs file a pull step imports image into (enroot
// import, scripts/slurm-pull.sh): RUNDIR/images/NAME.sqsh, NAME the image
// reference with each character outside [A-Za-z0-9._-] written "+".
func (r *slurmRT) sqshPath(image string) string {
	name := []byte(image)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			name[i] = '+'
		}
	}
	return r.runDir() + "/images/" + strings.TrimLeft(string(name), ".") + ".sqsh"
}

// EnrootURI writes an image reference as enroot import reads it:
// docker://[REGISTRY#]IMAGE[:TAG], the registry (a first component with a
// dot or a colon, or localhost) set off by "#".
func EnrootURI(image string) string {
	if first, rest, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return "docker://" + first + "#" + rest
	}
	return "docker://" + image
}

// slurmPullScript imports image with enroot (scripts/slurm-pull.sh).
func (r *slurmRT) slurmPullScript(image string) string {
	return script(Params{
		"tf_uri":           EnrootURI(image),
		"tf_sqsh":          r.sqshPath(image),
		"tf_exit_noenroot": strconv.Itoa(exitNoEnroot),
	}, "home", "slurm-pull")
}

// slurmPull is pull on Slurm: enroot imports the image on the login node
// into the run's directory, which the run's container jobs then use
// (batchScript). No enroot there is a clear failure; pyxis still pulls
// at job start for a plan without the pull step.
func (s *Steps) slurmPull(ctx context.Context, req Request, image string) error {
	inst := req.Instance
	r := &slurmRT{s: s}
	fmt.Fprintf(req.Log, "importing %s with enroot into %s unless it is there\n", image, r.sqshPath(image))
	res, err := s.exec(ctx, inst, r.slurmPullScript(image), nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "importing %s for pool %s: %v", image, inst.Name, err)
	case res.ExitCode == exitNoEnroot:
		return s.fail(ClassUnsupported, nil, "pull on slurm imports the image with enroot, which is not installed where Slurm's commands run (the login node): install enroot there, or remove the pull step (pyxis then pulls the image when each job starts)")
	}
	present := false
	for _, l := range outputLines(res.Stdout) {
		if l == "@present" {
			present = true
			continue
		}
		fmt.Fprintln(req.Log, l)
	}
	if res.ExitCode != 0 {
		return s.fail(ClassPullFailed, nil, "enroot import %s for pool %s failed (exit code %d): %s", EnrootURI(image), inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	if present {
		fmt.Fprintf(req.Log, "%s is imported already\n", image)
	}
	fmt.Fprintf(req.Log, "image %s: %s\n", image, r.sqshPath(image))
	if req.Record != nil {
		req.Record(RecordImage, image)
	}
	return nil
}

// submitScript queues spec in inst's pool (scripts/slurm-submit.sh),
// after the secrets prelude.
func (r *slurmRT) submitScript(inst platform.Instance, spec jobSpec) string {
	pool := r.pool(inst)
	batch := r.batchScript(spec)
	dir := r.runDir() + "/" + spec.ID
	params := Params{
		"tf_dir":         dir,
		"tf_job":         spec.ID,
		"tf_cmd":         spec.Command,
		"tf_pool":        inst.Name,
		"tf_run":         r.s.cfg.RunID,
		"tf_env":         words(r.s.sentSecrets(spec.Env)...),
		"tf_args":        words(SbatchArgs(r.s.cfg.RunID, spec.ID, pool)...),
		"tf_batch":       batch,
		"tf_pyxis":       boolParam(spec.Image != ""),
		"tf_exit_jobdir": strconv.Itoa(exitSlurmJobDir),
		"tf_exit_sbatch": strconv.Itoa(exitSbatch),
		"tf_exit_pyxis":  strconv.Itoa(exitPyxis),
	}
	return script(params, "home", "slurm-submit")
}

// sbatchLine is the sbatch command submitScript runs, for people: its
// options, and where its output and script are.
func (r *slurmRT) sbatchLine(inst platform.Instance, spec jobSpec) string {
	dir := r.runDir() + "/" + spec.ID
	line := "sbatch " + words(SbatchArgs(r.s.cfg.RunID, spec.ID, r.pool(inst))...)
	if r.s.cfg.Plan != nil && r.s.cfg.Plan.Instance(inst.Name) == nil {
		// A cell not placed yet (taoflow plan): its pool is one of its step's.
		line += " [+ the options of the pool it is placed in]"
	}
	return line + " --output=" + dir + "/log --chdir=" + dir + " < " + dir + "/job.sh"
}

func (r *slurmRT) submit(ctx context.Context, inst platform.Instance, spec jobSpec) (launch, error) {
	res, err := r.s.runSubmit(ctx, inst, spec, r.submitScript(inst, spec), "slurm job")
	if err != nil {
		return launch{}, err
	}
	if res.ExitCode != 0 {
		why := r.s.lastLine(res.Stderr)
		switch res.ExitCode {
		case exitNoSecret:
			why = "the job's secrets did not arrive on stdin"
		case exitSbatch:
			why = "sbatch refused it: " + why
		}
		if why == "" {
			why = fmt.Sprintf("the submit script exited with code %d", res.ExitCode)
		}
		return launch{}, r.s.fail(ClassLaunchFailed, nil, "slurm job %s in pool %s: %s", spec.ID, inst.Name, why)
	}
	adopted, ref, ok := launched(res.Stdout)
	if !ok {
		return launch{}, r.s.fail(ClassLaunchFailed, nil, "slurm job %s in pool %s: sbatch reported no job id", spec.ID, inst.Name)
	}
	return launch{Adopted: adopted, Ref: ref}, nil
}

// resubmitScript queues job again in inst's pool when Slurm ended its
// last one NODE_FAIL, BOOT_FAIL or PREEMPTED (scripts/slurm-resubmit.sh).
func (r *slurmRT) resubmitScript(inst platform.Instance, job string) string {
	return script(Params{
		"tf_dir":         r.runDir() + "/" + job,
		"tf_args":        words(SbatchArgs(r.s.cfg.RunID, job, r.pool(inst))...),
		"tf_exit_sbatch": strconv.Itoa(exitSbatch),
	}, "home", "slurm-resubmit")
}

// slurmResubmit runs, before a wait's retry polls (attempt 2 and later),
// resubmitScript for each of its Slurm jobs: a job whose node failed or
// that was preempted (ClassVanished, not the job's fault) runs again as
// a new sbatch job of the same name, so the step's retries retry it as
// a failed attempt is retried elsewhere. Jobs that ended otherwise stay
// as they are (the wait reads their end again).
func (s *Steps) slurmResubmit(ctx context.Context, req Request, ws []*watched) error {
	for _, w := range ws {
		r, ok := w.rt.(*slurmRT)
		if !ok {
			continue
		}
		res, err := s.exec(ctx, w.inst, r.resubmitScript(w.inst, w.job.ID), nil)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			why := s.lastLine(res.Stderr)
			if why == "" {
				why = fmt.Sprintf("the resubmit script exited with code %d", res.ExitCode)
			}
			return s.fail(ClassLaunchFailed, nil, "resubmitting slurm job %s in pool %s: %s", w.job.ID, w.inst.Name, why)
		}
		for _, line := range outputLines(res.Stdout) {
			fmt.Fprintf(req.Log, "%s%s\n", w.label, line)
		}
	}
	return nil
}

func (r *slurmRT) statusScript(probes []probe) string {
	list := make([]string, 0, 3*len(probes))
	names := make([]string, 0, len(probes))
	for _, pr := range probes {
		list = append(list, pr.ID, strconv.FormatInt(pr.Offset, 10), pr.Results)
		names = append(names, pr.ID)
	}
	return script(Params{
		"tf_base":        r.runDir(),
		"tf_names":       strings.Join(names, ","),
		"tf_probes":      words(list...),
		"tf_chunk":       strconv.Itoa(logChunk),
		"tf_exit_squeue": strconv.Itoa(exitSqueue),
	}, "home", "slurm-status")
}

// status observes probes together with those of the pool's other waits
// that poll within gatherWindow (one squeue for all of them).
func (r *slurmRT) status(ctx context.Context, inst platform.Instance, probes []probe) ([]observation, error) {
	r.mu.Lock()
	if r.next == nil {
		r.next = map[string]*slurmBatch{}
	}
	b := r.next[inst.Name]
	leader := b == nil
	if leader {
		b = &slurmBatch{done: make(chan struct{})}
		r.next[inst.Name] = b
	}
	off := len(b.probes)
	b.probes = append(b.probes, probes...)
	r.mu.Unlock()
	if leader {
		sleep(ctx, gatherWindow)
		r.mu.Lock()
		delete(r.next, inst.Name)
		all := b.probes
		r.mu.Unlock()
		// The others wait on it: it is not cut short by the leader's
		// cancellation, only bounded.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), minPollTimeout)
		b.obs, b.err = r.statusOnce(bctx, inst, all)
		cancel()
		close(b.done)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.obs[off : off+len(probes)], nil
}

// slurmPause is how long a wait of Slurm jobs that polls every interval
// sleeps: until the next multiple of interval on the clock, so that the
// waits of a pool poll together and share one squeue (status).
func slurmPause(interval time.Duration) time.Duration {
	now := time.Now()
	return now.Truncate(interval).Add(interval).Sub(now)
}

func (r *slurmRT) statusOnce(ctx context.Context, inst platform.Instance, probes []probe) ([]observation, error) {
	res, err := r.s.exec(ctx, inst, r.statusScript(probes), nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("polling slurm jobs of %s: exit code %d: %s", inst.Name, res.ExitCode, r.s.lastLine(res.Stderr))
	}
	obs, err := parseSlurmStatus(res.Stdout, probes)
	if err != nil {
		return nil, fmt.Errorf("polling slurm jobs of %s: %w", inst.Name, err)
	}
	return obs, nil
}

// squeueLine is one job as squeue printed it.
type squeueLine struct {
	ID, Name, State, Reason string
	Elapsed                 time.Duration
	Exit                    int // the wait status: code<<8 | signal
}

// parseSqueue reads "JOBID|NAME|STATE|REASON|ELAPSED|EXITCODE|".
func parseSqueue(l string) (squeueLine, bool) {
	f := strings.Split(l, "|")
	if len(f) < 6 {
		return squeueLine{}, false
	}
	q := squeueLine{ID: strings.TrimSpace(f[0]), Name: strings.TrimSpace(f[1]), State: strings.TrimSpace(f[2]), Reason: strings.TrimSpace(f[3])}
	q.Elapsed = slurmElapsed(strings.TrimSpace(f[4]))
	q.Exit, _ = strconv.Atoi(strings.TrimSpace(f[5]))
	// A state may carry a suffix ("CANCELLED by 0").
	q.State, _, _ = strings.Cut(q.State, " ")
	return q, q.Name != ""
}

// slurmElapsed reads squeue's [D-][HH:]MM:SS; 0 for what it cannot read.
func slurmElapsed(s string) time.Duration {
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		days, _ = strconv.Atoi(d)
		s = rest
	}
	secs := 0
	for _, p := range strings.Split(s, ":") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0
		}
		secs = secs*60 + n
	}
	return time.Duration(days*86400+secs) * time.Second
}

// parseSlurmStatus reads the output of statusScript for probes.
func parseSlurmStatus(out []byte, probes []probe) ([]observation, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	queue := map[string]squeueLine{}
	obs := make([]observation, len(probes))
	for i := range probes {
		var line string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("job %d: output ended early", i)
			}
			if q, ok := strings.CutPrefix(l, "@q "); ok {
				if sq, ok := parseSqueue(strings.TrimSuffix(q, "\n")); ok {
					// The latest of a name: a job queued again after a
					// cancel has a higher id.
					if old, seen := queue[sq.Name]; !seen || jobIDLess(old.ID, sq.ID) {
						queue[sq.Name] = sq
					}
				}
				continue
			}
			if strings.HasPrefix(l, "@job ") {
				line = strings.TrimSuffix(l, "\n")
				break
			}
		}
		f := strings.Fields(line)
		if len(f) != 7 || f[1] != strconv.Itoa(i) {
			return nil, fmt.Errorf("job %d: unexpected header %q", i, line)
		}
		size, err1 := strconv.ParseInt(f[5], 10, 64)
		n, err2 := strconv.ParseInt(f[6], 10, 64)
		if err1 != nil || err2 != nil || n < 0 {
			return nil, fmt.Errorf("job %d: unexpected header %q", i, line)
		}
		o := &obs[i]
		o.Log = make([]byte, n)
		if _, err := io.ReadFull(r, o.Log); err != nil {
			return nil, fmt.Errorf("job %d: log ended after %d bytes, want %d", i, len(o.Log), n)
		}
		o.More = size > probes[i].Offset+n
		l, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(l, "@status ") {
			return nil, fmt.Errorf("job %d: missing status line after the log", i)
		}
		o.Status = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(l, "@status "), "\n"), "\r", "")
		jid, rc, canceled := f[2], f[3], f[4] == "1"
		o.Canceled = canceled
		q, inQueue := queue[probes[i].ID]
		if inQueue && jid != "-" && q.ID != jid {
			// Not the job this directory names (a job of another run
			// with the same name, or one queued by hand).
			inQueue = false
		}
		slurmObservation(o, probes[i].ID, jid, rc, q, inQueue)
	}
	return obs, nil
}

// jobIDLess orders Slurm job ids as numbers.
func jobIDLess(a, b string) bool {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x < y
}

// slurmObservation maps what Slurm and the job's directory say onto o
// (docs/design.md §6.3, the table of states).
func slurmObservation(o *observation, id, jid, rc string, q squeueLine, inQueue bool) {
	code, rcErr := strconv.Atoi(rc)
	hasRC := rcErr == nil
	switch {
	case !inQueue && jid == "-":
		o.State = stateMissing
		return
	case !inQueue && hasRC:
		o.State, o.Code = stateExited, code
		return
	case !inQueue:
		o.State = stateVanished
		o.Reason = fmt.Sprintf("Slurm no longer lists job %s and it left no exit code (it ended more than MinJobAge ago, was cancelled before it started, or its node went away)", jid)
		return
	}
	o.Age = q.Elapsed
	if hasRC && code == 0 && (q.State == "RUNNING" || q.State == "COMPLETING") {
		// The batch script wrote its exit code 0 as its last act: the job
		// is done, though Slurm has not yet moved it on (the watcher woke
		// this poll at its end, not at the next tick). A code other than
		// 0 waits for Slurm's own state: it may say why (OUT_OF_MEMORY,
		// TIMEOUT).
		o.State, o.Code = stateExited, 0
		return
	}
	exit := q.Exit >> 8
	if sig := q.Exit & 0x7f; sig != 0 {
		exit = 128 + sig
	}
	switch q.State {
	case "PENDING":
		o.State = stateRunning
		o.Note = "pending in Slurm's queue (" + q.Reason + ")"
	case "RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "RESIZING":
		o.State = stateRunning
	case "SUSPENDED", "STOPPED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		o.State = stateRunning
		o.Note = "Slurm says " + q.State + " (" + q.Reason + ")"
	case "COMPLETED":
		o.State, o.Code = stateExited, 0
		if hasRC {
			o.Code = code
		}
	case "FAILED":
		o.State, o.Code = stateExited, exit
		if hasRC {
			o.Code = code
		}
		if o.Code == 0 {
			o.Fail = &Error{Class: ClassJobFailed, Code: 1, Msg: fmt.Sprintf("slurm job %s (%s) failed (%s)", jid, id, q.Reason)}
		}
	case "TIMEOUT", "DEADLINE":
		o.State, o.Code = stateExited, exit
		o.Fail = &Error{Class: ClassTimedOut, Code: 124, Msg: fmt.Sprintf("slurm job %s (%s) reached its time limit after %s (Slurm: %s)", jid, id, q.Elapsed, q.State)}
	case "CANCELLED":
		o.State, o.Code = stateExited, exit
		msg := fmt.Sprintf("slurm job %s (%s) was cancelled", jid, id)
		if !o.Canceled {
			msg += " outside taoflow (scancel, or an administrator)"
		}
		o.Fail = &Error{Class: ClassCanceled, Code: 130, Msg: msg}
	case "OUT_OF_MEMORY":
		o.State, o.Code = stateExited, exit
		o.Fail = &Error{Class: ClassJobFailed, Code: max(exit, 1), Msg: fmt.Sprintf("slurm job %s (%s) failed: out of memory (OUT_OF_MEMORY: raise the pool's mem)", jid, id)}
	case "NODE_FAIL", "BOOT_FAIL", "PREEMPTED":
		o.State, o.Code = stateExited, exit
		o.Fail = &Error{Class: ClassVanished, Code: max(exit, 1), Msg: fmt.Sprintf("slurm job %s (%s) ended %s: its node failed or it was preempted, not the job itself (the wait's retries queue it again)", jid, id, q.State)}
	default:
		o.State, o.Code = stateExited, exit
		o.Fail = &Error{Class: ClassJobFailed, Code: max(exit, 1), Msg: fmt.Sprintf("slurm job %s (%s) ended in state %s (%s)", jid, id, q.State, q.Reason)}
	}
}

func (r *slurmRT) cancelScript(ids []string, pool string, remove bool) string {
	return script(Params{
		"tf_base":   r.runDir(),
		"tf_ids":    words(ids...),
		"tf_run":    r.s.cfg.RunID,
		"tf_pool":   pool,
		"tf_remove": boolParam(remove),
	}, "home", "slurm-cancel")
}

func (r *slurmRT) cancel(ctx context.Context, inst platform.Instance, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return r.stop(ctx, inst, r.cancelScript(ids, "", false))
}

// cleanup cancels every job of the run in inst's pool, those the state
// knows and those only Slurm's queue does (by name and comment), and
// removes their secrets files.
func (r *slurmRT) cleanup(ctx context.Context, inst platform.Instance) ([]string, error) {
	return r.stop(ctx, inst, r.cancelScript(nil, inst.Name, true))
}

func (r *slurmRT) stop(ctx context.Context, inst platform.Instance, sc string) ([]string, error) {
	res, err := r.s.exec(ctx, inst, sc, nil)
	if err != nil {
		return nil, err
	}
	lines := outputLines(res.Stdout)
	if res.ExitCode != 0 {
		return lines, fmt.Errorf("cancelling slurm jobs of %s: exit code %d: %s", inst.Name, res.ExitCode, r.s.lastLine(res.Stderr))
	}
	return lines, nil
}

// recordGPUHours records, for Slurm jobs whose pool has GPUs, each job's
// GPU-hours so far (RecordGPUHours: elapsed, as squeue counts it, × the
// pool's GPUs), when they changed since last (what it returns).
func (s *Steps) recordGPUHours(req Request, ws []*watched, last string) string {
	if !s.onSlurm() || req.Record == nil || s.cfg.Plan == nil {
		return last
	}
	hours := map[string]float64{}
	for _, w := range ws {
		pi := s.cfg.Plan.Instance(w.inst.Name)
		if pi == nil || pi.GPUs == 0 || w.age <= 0 {
			continue
		}
		hours[w.job.ID] = math.Round(w.age.Hours()*float64(pi.GPUs)*1e4) / 1e4
	}
	if len(hours) == 0 {
		return last
	}
	b, err := json.Marshal(hours)
	if err != nil || string(b) == last {
		return last
	}
	req.Record(RecordGPUHours, string(b))
	return string(b)
}
