package steps

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// jobsDir is where the process runtime keeps its job directories, relative
// to the instance's $HOME.
const jobsDir = ".taoflow/jobs"

// logChunk bounds the log bytes one status call returns per job; the rest
// comes on the next call.
const logChunk = 512 << 10

// Exit codes of the submit script (besides exitNoSecret).
const (
	exitJobDir  = 90 // cannot create the job directory
	exitWorkdir = 91 // the working directory does not exist
	exitSetsid  = 92 // setsid is missing
)

// process is the runtime of host-process jobs. A job is a directory
// ~/.taoflow/jobs/<id>/ on the instance holding
//
//	cmd.sh    the command text
//	run       the run id (so cleanup never touches another run's job)
//	started   the start time, Unix seconds by taoflow's clock (ages are
//	          read by it too: the instance's clock never matters)
//	pid       the supervisor's pid, which is also the job's process group
//	log       the command's stdout and stderr
//	rc        the exit code, written in one write when the job ends (an
//	          rc still empty while the supervisor lives reads as running)
//	canceled  present when taoflow canceled the job
//
// The supervisor (scripts/proc-supervisor.sh) is a shell in its own
// session (setsid), detached from the Exec that launched it; it runs
// cmd.sh, catches TERM so that it outlives its child, and writes rc. The
// launcher writes started and pid ($!, the supervisor: setsid execs it
// without a fork of its own) itself, so that it waits for nothing.
type process struct {
	s *Steps
	// termGrace is how long a canceled job has between TERM and KILL.
	termGrace time.Duration
}

// defaultTermGrace is the time between TERM and KILL when a job is
// canceled.
const defaultTermGrace = 5 * time.Second

// funcs returns the shared process functions (scripts/procfuncs.sh)
// with the TERM grace set, followed by the named scripts with params.
func (p *process) funcs(params Params, names ...string) string {
	tenths := max(1, int((p.termGrace+99*time.Millisecond)/(100*time.Millisecond)))
	params["tf_limit"] = strconv.Itoa(tenths)
	params["tf_jobs"] = jobsDir
	return script(params, append([]string{"procfuncs"}, names...)...)
}

var _ runtime = (*process)(nil)

// workdirName names a job's working directory in messages: "" is the
// home directory.
func workdirName(dir string) string {
	if dir == "" {
		return "~ (the home directory)"
	}
	return dir
}

// submitScript is the script that launches spec (after the secret
// prelude): scripts/proc-submit.sh, which starts scripts/proc-supervisor.sh.
func (p *process) submitScript(spec jobSpec) string {
	return p.funcs(Params{
		"tf_job":          spec.ID,
		"tf_run":          p.s.cfg.RunID,
		"tf_instance":     spec.Instance,
		"tf_cmd":          spec.Command,
		"tf_workdir":      spec.Workdir,
		"tf_workdir_msg":  "working directory " + workdirName(spec.Workdir) + " does not exist on the instance",
		"tf_supervisor":   script(nil, "proc-supervisor"),
		"tf_exit_jobdir":  strconv.Itoa(exitJobDir),
		"tf_exit_workdir": strconv.Itoa(exitWorkdir),
		"tf_exit_setsid":  strconv.Itoa(exitSetsid),
		"tf_now":          strconv.FormatInt(time.Now().Unix(), 10),
	}, "home", "proc-submit")
}

func (p *process) submit(ctx context.Context, inst platform.Instance, spec jobSpec) (launch, error) {
	res, err := p.s.runSubmit(ctx, inst, spec, p.submitScript(spec), "job")
	if err != nil {
		return launch{}, err
	}
	if res.ExitCode != 0 {
		why := p.s.lastLine(res.Stderr)
		switch res.ExitCode {
		case exitNoSecret:
			why = "the job's secrets did not arrive on stdin"
		default:
			if why == "" {
				why = fmt.Sprintf("the launch script exited with code %d", res.ExitCode)
			}
		}
		return launch{}, p.s.fail(ClassLaunchFailed, nil, "job %s on %s: %s", spec.ID, inst.Name, why)
	}
	adopted, pid, ok := launched(res.Stdout)
	if !ok {
		return launch{}, p.s.fail(ClassLaunchFailed, nil, "job %s on %s: the launch script did not report a pid", spec.ID, inst.Name)
	}
	l := launch{Adopted: adopted}
	if pid != "" {
		l.Ref = "pid:" + pid
	}
	return l, nil
}

// statusScript observes probes in one script (scripts/proc-status.sh):
// for each, a header line
//
//	@job INDEX STATE CODE CANCELED AGE SIZE N
//
// then N log bytes, then "@status LINE".
func (p *process) statusScript(probes []probe) string {
	list := make([]string, 0, 3*len(probes))
	for _, pr := range probes {
		list = append(list, pr.ID, strconv.FormatInt(pr.Offset, 10), pr.Results)
	}
	return p.funcs(Params{"tf_probes": words(list...), "tf_chunk": strconv.Itoa(logChunk), "tf_now": strconv.FormatInt(time.Now().Unix(), 10)}, "home", "stlines", "proc-status")
}

func (p *process) status(ctx context.Context, inst platform.Instance, probes []probe) ([]observation, error) {
	res, err := p.s.exec(ctx, inst, p.statusScript(probes), nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("polling jobs on %s: exit code %d: %s", inst.Name, res.ExitCode, p.s.lastLine(res.Stderr))
	}
	obs, err := parseStatus(res.Stdout, probes)
	if err != nil {
		return nil, fmt.Errorf("polling jobs on %s: %w", inst.Name, err)
	}
	return obs, nil
}

// parseStatus reads the output of statusScript for probes.
func parseStatus(out []byte, probes []probe) ([]observation, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	obs := make([]observation, len(probes))
	for i := range probes {
		var line string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("job %d: output ended early", i)
			}
			if strings.HasPrefix(l, "@job ") {
				line = strings.TrimSuffix(l, "\n")
				break
			}
			// anything else is noise from the instance's shell startup
		}
		f := strings.Fields(line)
		if len(f) != 8 || f[1] != strconv.Itoa(i) {
			return nil, fmt.Errorf("job %d: unexpected header %q", i, line)
		}
		o := &obs[i]
		switch f[2] {
		case "running":
			o.State = stateRunning
		case "exited":
			o.State = stateExited
		case "missing":
			o.State = stateMissing
		case "vanished":
			o.State = stateVanished
		default:
			return nil, fmt.Errorf("job %d: unknown state %q", i, f[2])
		}
		nums := make([]int64, 4)
		for k, s := range []string{f[3], f[5], f[6], f[7]} {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("job %d: bad number %q", i, s)
			}
			nums[k] = v
		}
		o.Code = int(nums[0])
		o.Canceled = f[4] == "1"
		o.Age = time.Duration(max(nums[1], 0)) * time.Second
		size, chunk := nums[2], nums[3]
		o.Log = make([]byte, chunk)
		if _, err := io.ReadFull(r, o.Log); err != nil {
			return nil, fmt.Errorf("job %d: log ended after %d bytes, want %d", i, len(o.Log), chunk)
		}
		o.More = size > probes[i].Offset+chunk
		lines, l, err := readStatus(r)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		o.Status, o.StatusLines = l, lines
	}
	return obs, nil
}

// readStatus reads what a status script prints of a job's status.json
// after its log bytes: "@st LINE" for each line of the file's end, then
// "@status REST". status.json's carriage returns are dropped here, not in
// a process on the instance.
func readStatus(r *bufio.Reader) (lines []string, rest string, err error) {
	for {
		l, err := r.ReadString('\n')
		l = strings.ReplaceAll(strings.TrimSuffix(l, "\n"), "\r", "")
		switch {
		case err != nil:
			return nil, "", errors.New("missing status line after the log")
		case strings.HasPrefix(l, "@st "):
			lines = append(lines, l[len("@st "):])
		case strings.HasPrefix(l, "@status "):
			return lines, l[len("@status "):], nil
		default:
			return nil, "", errors.New("missing status line after the log")
		}
	}
}

// cancelScript stops the jobs ids (scripts/proc-cancel.sh).
func (p *process) cancelScript(ids []string) string {
	return p.funcs(Params{"tf_ids": words(ids...)}, "proc-cancel")
}

func (p *process) cancel(ctx context.Context, inst platform.Instance, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return p.stop(ctx, inst, p.cancelScript(ids))
}

// cleanupScript stops every job of run whose directory name starts with
// prefix (and whose run file, where it has one, names run, and whose
// instance file, where it has one, names instance: two plan instances can
// be one machine); with remove, it then removes their job directories (the
// logs in them hold whatever the jobs printed, secrets included):
// scripts/proc-cleanup.sh. It first disarms the instance's autostop, if
// it has one (scripts/autostop-disarm.sh): its watchdog must not fire
// while the jobs stop, nor outlive the run on a machine that stays.
func (p *process) cleanupScript(prefix, run, instance string, remove bool) string {
	return p.funcs(Params{"tf_prefix": prefix, "tf_run": run, "tf_instance": instance, "tf_remove": boolParam(remove),
		"tf_autostop": AutostopDir(run, instance)}, "autostop-disarm", "proc-cleanup")
}

func (p *process) cleanup(ctx context.Context, inst platform.Instance) ([]string, error) {
	return p.stop(ctx, inst, p.cleanupScript(plan.JobPrefix(p.s.cfg.RunID), p.s.cfg.RunID, inst.Name, !p.s.keepJobDirs(inst)))
}

func (p *process) stop(ctx context.Context, inst platform.Instance, script string) ([]string, error) {
	res, err := p.s.exec(ctx, inst, script, nil)
	if err != nil {
		return nil, err
	}
	lines := outputLines(res.Stdout)
	if res.ExitCode != 0 {
		return lines, fmt.Errorf("stopping jobs on %s: exit code %d: %s", inst.Name, res.ExitCode, p.s.lastLine(res.Stderr))
	}
	return lines, nil
}
