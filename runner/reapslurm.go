package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// slurmCommandTimeout bounds each Slurm command reap runs.
const slurmCommandTimeout = time.Minute

// reapSlurm lists this user's Slurm jobs (squeue --me, on this machine,
// when it is a Slurm client: slurmHere) named tf-* with a taoflow comment, and sorts them into Found (no state
// knows them, and no apply of their run is alive) and NotReaped.
func (r *Reaper) reapSlurm(ctx context.Context, known map[string]string, elsewhere map[string]elsewhereRun, live map[string]bool) {
	if !slurmHere() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, slurmCommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, "squeue", "--me", "-h", "-o", "%i|%j|%T|%k").Output()
	if err != nil {
		r.Problems = append(r.Problems, fmt.Errorf("listing Slurm jobs (squeue --me): %w", err))
		return
	}
	for _, j := range parseSlurmJobs(string(out)) {
		detail := j.state + ", run " + j.run + ", slurm job " + j.id
		switch run, inState := known["job:"+j.name]; {
		case live[j.run]:
			continue // its apply is running
		case inState:
			r.NotReaped = append(r.NotReaped, Orphan{Kind: "slurm job", Name: j.name, Detail: detail, Reason: ReasonInState,
				Why: "it belongs to run " + run + " in the state", Command: "taoflow destroy " + run})
		default:
			if e, ok := elsewhere["job:"+j.name]; ok {
				r.NotReaped = append(r.NotReaped, e.orphan(Orphan{Kind: "slurm job", Name: j.name, Detail: detail}))
				continue
			}
			r.Found = append(r.Found, Orphan{Kind: "slurm job", Name: j.name, Detail: detail, slurmID: j.id})
		}
	}
}

// slurmHere reports whether this machine is a Slurm client: squeue on
// PATH and a configuration (SLURM_CONF, or /etc/slurm/slurm.conf). A
// machine that is none has no Slurm jobs to list, and says nothing of it.
func slurmHere() bool {
	if !haveProgram("squeue") {
		return false
	}
	if os.Getenv("SLURM_CONF") != "" {
		return true
	}
	_, err := os.Stat("/etc/slurm/slurm.conf")
	return err == nil
}

// slurmJob is a job of squeue's "%i|%j|%T|%k" that taoflow queued.
type slurmJob struct{ id, name, state, run string }

// parseSlurmJobs keeps the jobs named tf-* whose comment is taoflow's
// ("taoflow run=RUN pool=POOL") and names a run their name starts with.
func parseSlurmJobs(out string) []slurmJob {
	var jobs []slurmJob
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(l), "|", 4)
		if len(f) != 4 || !strings.HasPrefix(f[1], "tf-") {
			continue
		}
		rest, ok := strings.CutPrefix(f[3], "taoflow run=")
		if !ok {
			continue
		}
		run, _, _ := strings.Cut(rest, " ")
		if run == "" || !strings.HasPrefix(f[1], "tf-"+run+"-") {
			continue
		}
		jobs = append(jobs, slurmJob{id: f[0], name: f[1], state: f[2], run: run})
	}
	return jobs
}

// removeSlurm cancels the Slurm jobs reap found, with one scancel, and
// returns how many may remain.
func (r *Reaper) removeSlurm(ctx context.Context) int {
	var ids []string
	var found []*Orphan
	for i := range r.Found {
		if o := &r.Found[i]; o.Kind == "slurm job" {
			ids, found = append(ids, o.slurmID), append(found, o)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, slurmCommandTimeout)
	defer cancel()
	var err error
	if out, cerr := exec.CommandContext(cctx, "scancel", ids...).CombinedOutput(); cerr != nil {
		err = fmt.Errorf("scancel: %w: %s", cerr, strings.TrimSpace(string(out)))
	}
	for _, o := range found {
		o.done(err)
	}
	if err != nil {
		return len(found)
	}
	return 0
}
