package steps

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
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
	exitNoPid   = 93 // the job did not write its pid in time
)

// process is the runtime of host-process jobs. A job is a directory
// ~/.taoflow/jobs/<id>/ on the instance holding
//
//	cmd.sh    the command text
//	run       the run id (so cleanup never touches another run's job)
//	started   the start time, Unix seconds
//	pid       the supervisor's pid, which is also the job's process group
//	log       the command's stdout and stderr
//	rc        the exit code, written (temp file + mv) when the job ends
//	canceled  present when taoflow canceled the job
//
// The supervisor is a shell in its own session (setsid), detached from the
// Exec that launched it; it runs cmd.sh, catches TERM so that it outlives
// its child, and writes rc.
type process struct {
	s *Steps
	// termGrace is how long a canceled job has between TERM and KILL.
	termGrace time.Duration
}

// defaultTermGrace is the time between TERM and KILL when a job is
// canceled.
const defaultTermGrace = 5 * time.Second

// funcs returns the shared process functions (scripts/procfuncs.sh)
// with the TERM grace set.
func (p *process) funcs() string {
	tenths := max(1, int((p.termGrace+99*time.Millisecond)/(100*time.Millisecond)))
	return script(Params{"tf_limit": strconv.Itoa(tenths)}, "procfuncs")
}

var _ runtime = (*process)(nil)

// supervisor is the detached shell that runs a job; $1 is its directory.
const supervisor = `d=$1
: > "$d/log"
date +%s > "$d/started"
echo $$ > "$d/pid.tmp" && mv -f "$d/pid.tmp" "$d/pid"
trap : TERM INT HUP
sh "$d/cmd.sh" > "$d/log" 2>&1 < /dev/null
rc=$?
echo "$rc" > "$d/rc.tmp" && mv -f "$d/rc.tmp" "$d/rc"
`

// jobDir is the job directory of id as a shell word.
func jobDir(id string) string {
	return `"$HOME"/` + shellquote.Quote(jobsDir+"/"+id)
}

// workdirName names a job's working directory in messages: "" is the
// home directory.
func workdirName(dir string) string {
	if dir == "" {
		return "~ (the home directory)"
	}
	return dir
}

// submitScript is the script that launches spec (after the secret prelude).
func (p *process) submitScript(spec jobSpec) string {
	workdir := `"$HOME"`
	if spec.Workdir != "" {
		workdir = shellPath(spec.Workdir)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "jobs=\"$HOME\"/%s\n", shellquote.Quote(jobsDir))
	fmt.Fprintf(&b, "d=%s\n", jobDir(spec.ID))
	fmt.Fprintf(&b, `mkdir -p "$jobs" || { echo "cannot create $jobs" >&2; exit %[1]d; }
if ! mkdir "$d" 2>/dev/null; then
	[ -d "$d" ] || { echo "cannot create the job directory $d" >&2; exit %[1]d; }
	i=0
	while [ ! -f "$d/pid" ] && [ ! -f "$d/rc" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	if [ -f "$d/pid" ] || [ -f "$d/rc" ]; then echo "adopted $(cat "$d/pid" 2>/dev/null)"; exit 0; fi
	rm -f "$d/log" "$d/started" "$d/canceled"
fi
`, exitJobDir)
	fmt.Fprintf(&b, "printf %%s %s > \"$d/run\" || exit %d\n", shellquote.Quote(p.s.cfg.RunID), exitJobDir)
	// The plan instance it runs for: two plan instances can be one machine
	// (two ssh aliases of one box), and cleanup stops only its own.
	fmt.Fprintf(&b, "printf %%s %s > \"$d/instance\" || exit %d\n", shellquote.Quote(spec.Instance), exitJobDir)
	fmt.Fprintf(&b, "printf '%%s\\n' %s > \"$d/cmd.sh\" || exit %d\n", shellquote.Quote(spec.Command), exitJobDir)
	fmt.Fprintf(&b, "cd %s 2>/dev/null || { echo %s >&2; rm -rf \"$d\"; exit %d; }\n",
		workdir, shellquote.Quote("working directory "+workdirName(spec.Workdir)+" does not exist on the instance"), exitWorkdir)
	fmt.Fprintf(&b, "command -v setsid >/dev/null 2>&1 || { echo 'setsid is not installed on the instance (util-linux)' >&2; rm -rf \"$d\"; exit %d; }\n", exitSetsid)
	fmt.Fprintf(&b, "setsid sh -c %s taoflow-job \"$d\" < /dev/null > /dev/null 2>&1 &\n", shellquote.Quote(supervisor))
	fmt.Fprintf(&b, `i=0
while [ ! -f "$d/pid" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$d/pid" ] || { echo "the job did not start within 10s" >&2; exit %d; }
echo "launched $(cat "$d/pid")"
`, exitNoPid)
	return b.String()
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

// statusScript observes probes in one script: for each, a header line
//
//	@job INDEX STATE CODE CANCELED AGE SIZE N
//
// then N log bytes, then "@status LINE".
func (p *process) statusScript(probes []probe) string {
	var b strings.Builder
	b.WriteString(p.funcs())
	fmt.Fprintf(&b, `tf_poll() {
	d="$HOME"/%s/$2
	state=missing code=0 canceled=0 age=0 size=0 n=0
	if [ -d "$d" ]; then
		if [ -f "$d/rc" ]; then
			state=exited
		elif tf_pid "$d"; then
			if tf_alive "$tf_p"; then
				state=running
			elif [ -f "$d/rc" ]; then
				state=exited
			else
				state=vanished
				tf_group "$tf_p" && kill -KILL -"$tf_p" 2>/dev/null
			fi
		fi
		if [ "$state" = exited ]; then
			code=$(cat "$d/rc" 2>/dev/null)
			case $code in ''|*[!0-9]*) code=-1;; esac
		fi
		[ -f "$d/canceled" ] && canceled=1
		s=$(cat "$d/started" 2>/dev/null)
		case $s in ''|*[!0-9]*) ;; *) age=$(( $(date +%%s) - s ));; esac
		if [ -f "$d/log" ]; then
			size=$(wc -c < "$d/log" | tr -dc 0-9)
			n=$(( ${size:-0} - $3 ))
			[ "$n" -lt 0 ] && n=0
			[ "$n" -gt %d ] && n=%d
		fi
	fi
	printf '@job %%s %%s %%s %%s %%s %%s %%s\n' "$1" "$state" "$code" "$canceled" "$age" "${size:-0}" "$n"
	[ "$n" -gt 0 ] && tail -c +$(( $3 + 1 )) "$d/log" | head -c "$n"
	st=
	if [ -n "$4" ] && [ -f "$4/status.json" ] && ! [ "$d/pid" -nt "$4/status.json" ]; then
		st=$(tail -n 1 "$4/status.json" | head -c 4096 | tr -d '\r\n')
	fi
	printf '@status %%s\n' "$st"
}
`, shellquote.Quote(jobsDir), logChunk, logChunk)
	for i, pr := range probes {
		results := "''"
		if pr.Results != "" {
			results = shellPath(pr.Results)
		}
		fmt.Fprintf(&b, "tf_poll %d %s %d %s\n", i, shellquote.Quote(pr.ID), pr.Offset, results)
	}
	return b.String()
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
		l, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(l, "@status ") {
			return nil, fmt.Errorf("job %d: missing status line after the log", i)
		}
		o.Status = strings.TrimSuffix(strings.TrimPrefix(l, "@status "), "\n")
	}
	return obs, nil
}

// cancelScript stops the jobs ids.
func (p *process) cancelScript(ids []string) string {
	var b strings.Builder
	b.WriteString(p.funcs())
	for _, id := range ids {
		fmt.Fprintf(&b, "tf_term %s\n", jobDir(id))
	}
	b.WriteString("tf_reap\n")
	return b.String()
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
// logs in them hold whatever the jobs printed, secrets included).
func (p *process) cleanupScript(prefix, run, instance string, remove bool) string {
	var b strings.Builder
	b.WriteString(p.funcs())
	fmt.Fprintf(&b, `tf_dirs=
for d in "$HOME"/%s/%s*; do
	[ -d "$d" ] || continue
	if [ -f "$d/run" ] && [ "$(cat "$d/run")" != %s ]; then continue; fi
	if [ -f "$d/instance" ] && [ "$(cat "$d/instance")" != %s ]; then continue; fi
	tf_term "$d"
	tf_dirs="$tf_dirs $(basename "$d")"
done
tf_reap
`, shellquote.Quote(jobsDir), shellquote.Quote(prefix), shellquote.Quote(run), shellquote.Quote(instance))
	if remove {
		// Job ids are [a-zA-Z0-9_.-] words (plan.JobID), so the list
		// splits as it was built.
		fmt.Fprintf(&b, "for n in $tf_dirs; do rm -rf \"$HOME\"/%s/\"$n\"; done\n", shellquote.Quote(jobsDir))
	}
	return b.String()
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
