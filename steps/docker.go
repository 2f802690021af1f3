package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// Labels every container taoflow launches carries (docs/design.md §5).
const (
	labelJob = "tao-job"     // the job id, which is also the container name
	labelRun = "taoflow.run" // the run id: what reap looks for
	// labelInstance is the plan's instance name. With labelRun it is what
	// Cleanup removes: local sandboxes share one Docker engine, and tearing
	// one down early must not stop the others' jobs.
	labelInstance = "taoflow.instance"
	// labelOwner is Config.Owner, HOST:PID of the process driving the run.
	labelOwner = "taoflow.owner"
)

// Exit codes of the container scripts (besides exitNoSecret and docker's
// own 125, 126 and 127).
const (
	exitNoDockerCLI = 94 // docker is not installed on the instance
	exitNoDaemon    = 95 // docker could not list containers
)

// Reasons of observations of containers (observation.Reason).
const (
	reasonOOM         = "oom"
	reasonStartFailed = "start_failed"
)

// dockerCheck starts every container script: without a docker CLI the
// shell's own 127 would read as docker run's "command not found".
var dockerCheck = fmt.Sprintf("command -v docker >/dev/null 2>&1 || { echo 'docker is not installed on the instance' >&2; exit %d; }\n", exitNoDockerCLI)

// docker is the runtime of container jobs. A job is a container named
// after the job id with the labels tao-job=<job> and taoflow.run=<run>,
// launched with docker run -d and never with --rm: it stays, exited, until
// cancel or Cleanup removes it, so a retry or a resume finds it and its
// logs stay readable.
//
// A cancel by taoflow leaves a marker file ~/.taoflow/jobs/<job>/canceled
// on the instance (as the process runtime does), so that an exit code of
// 137 or 143, or a container that is gone, reads as canceled, not failed.
type docker struct {
	s *Steps
	// stopGrace is docker stop's time between TERM and KILL (whole
	// seconds, at least 1).
	stopGrace time.Duration
}

var (
	_ runtime = (*docker)(nil)
	_ remover = (*docker)(nil)
)

// stopSeconds is stopGrace as docker stop -t takes it.
func (d *docker) stopSeconds() int {
	return max(1, int((d.stopGrace+999*time.Millisecond)/time.Second))
}

// markerDir is the directory of job id's cancel marker, as a shell word.
func markerDir(id string) string { return jobDir(id) }

// checkContainerSpec checks what the schema cannot: values substituted
// from expressions, and a command the instance's shell must only split.
func checkContainerSpec(spec jobSpec) error {
	if err := checkImage("with.image", spec.Image); err != nil {
		return err
	}
	if spec.GPUs != "" && !gpusRE.MatchString(spec.GPUs) {
		return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.gpus: %q must be all, a count, or device=N[,N...]", spec.GPUs)}
	}
	if spec.IPC != "" && spec.IPC != "host" && spec.IPC != "private" && spec.IPC != "shareable" {
		return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.ipc: %q must be host, private or shareable", spec.IPC)}
	}
	for key, v := range map[string]string{"shm_size": spec.ShmSize, "memory": spec.Memory} {
		if v != "" && !sizeRE.MatchString(v) {
			return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q must be a size such as 512m or 16g", key, v)}
		}
	}
	for _, v := range spec.Volumes {
		if v == "" || strings.HasPrefix(v, "-") {
			return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.volumes: %q is not HOST:CONTAINER", v)}
		}
	}
	if strings.HasPrefix(spec.User, "-") {
		return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.user: %q is not a user", spec.User)}
	}
	if err := checkArgv(spec.Command); err != nil {
		return &Error{Class: ClassInvalidConfig, Msg: "with.command: " + err.Error()}
	}
	return nil
}

var (
	gpusRE = regexp.MustCompile(`^(all|[0-9]+|device=[0-9]+(,[0-9]+)*)$`)
	sizeRE = regexp.MustCompile(`^[0-9]+[bkmgBKMG]?$`)
)

// checkImage refuses an image reference docker would read as an option or
// that holds blanks.
func checkImage(field, image string) error {
	if image == "" || strings.HasPrefix(image, "-") || strings.ContainsAny(image, " \t\r\n") {
		return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("%s: %q is not an image reference", field, image)}
	}
	return nil
}

// checkArgv checks a container's command (plan.CheckContainerArgv, which
// validate runs on the template too). The command is shell text whose
// substituted values are single-quoted words (shellquote.Quote); it is put
// after the image unquoted, so that the instance's shell splits it into the
// container's arguments (an image such as a FROM-scratch one may have no
// shell to run it with), and that shell must do nothing else.
func checkArgv(cmd string) error { return plan.CheckContainerArgv(cmd) }

// volumeArg writes -v's value as one shell word: a host path starting
// with ~ becomes "$HOME"/rest, the rest is quoted.
func volumeArg(v string) (host, word string) {
	h, rest, ok := strings.Cut(v, ":")
	if !ok || !(strings.HasPrefix(h, "/") || h == "~" || strings.HasPrefix(h, "~/")) {
		return "", shellquote.Quote(v) // a named or anonymous volume
	}
	return shellPath(h), shellPath(h) + shellquote.Quote(":"+rest)
}

// runArgs returns docker run's arguments for spec, after `docker run`, as
// shell text: the command is appended as it is (see checkArgv).
func (d *docker) runArgs(spec jobSpec) string {
	q := shellquote.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "-d --name %s --label %s --label %s", q(spec.ID), q(labelJob+"="+spec.ID), q(labelRun+"="+d.s.cfg.RunID))
	if spec.Instance != "" {
		fmt.Fprintf(&b, " --label %s", q(labelInstance+"="+spec.Instance))
	}
	fmt.Fprintf(&b, " --label %s", q(labelOwner+"="+d.s.cfg.Owner))
	switch {
	case spec.GPUs == "" || spec.GPUs == "0":
	case strings.Contains(spec.GPUs, ","):
		// docker reads --gpus as CSV: a device list is one quoted field.
		fmt.Fprintf(&b, " --gpus %s", q(`"`+spec.GPUs+`"`))
	default:
		fmt.Fprintf(&b, " --gpus %s", q(spec.GPUs))
	}
	for _, v := range spec.Volumes {
		_, w := volumeArg(v)
		fmt.Fprintf(&b, " -v %s", w)
	}
	seen := map[string]bool{}
	for _, name := range spec.Env {
		if !seen[name] {
			seen[name] = true
			fmt.Fprintf(&b, " -e %s", q(name))
		}
	}
	for _, o := range []struct{ flag, val string }{
		{"-w", spec.Workdir}, {"--ipc", spec.IPC}, {"--shm-size", spec.ShmSize},
		{"--memory", spec.Memory}, {"--user", spec.User},
	} {
		if o.val != "" {
			fmt.Fprintf(&b, " %s %s", o.flag, q(o.val))
		}
	}
	fmt.Fprintf(&b, " %s", q(spec.Image))
	if c := strings.TrimSpace(spec.Command); c != "" {
		b.WriteString(" " + c)
	}
	return b.String()
}

// submitScript launches spec's container unless one exists: by name, else
// by the label tao-job=<job> (a container renamed since). A container
// that failed to start (docker run's 125, 126, 127) is removed, so that a
// retry launches again instead of adopting it.
func (d *docker) submitScript(spec jobSpec) string {
	var b strings.Builder
	b.WriteString(dockerCheck)
	fmt.Fprintf(&b, "j=%s\n", shellquote.Quote(spec.ID))
	fmt.Fprintf(&b, `if id=$(docker inspect --type container --format '{{.Id}}' "$j" 2>/dev/null); then echo "adopted $id"; exit 0; fi
id=$(docker ps -a -q --no-trunc --filter label=%s="$j") || { echo 'cannot list the containers (is the docker daemon running?)' >&2; exit %d; }
if [ -n "$id" ]; then echo "adopted $(echo "$id" | head -n 1)"; exit 0; fi
rm -f %[3]s/canceled %[3]s/docker.*
`, labelJob, exitNoDaemon, markerDir(spec.ID))
	for _, v := range spec.Volumes {
		if host, _ := volumeArg(v); host != "" {
			// Made by the user, not by the daemon as root.
			fmt.Fprintf(&b, "[ -e %[1]s ] || mkdir -p %[1]s 2>/dev/null\n", host)
		}
	}
	fmt.Fprintf(&b, `set -f
id=$(docker run %s)
rc=$?
if [ "$rc" -ne 0 ]; then
	[ "$(docker inspect --type container --format '{{.State.Status}}' "$j" 2>/dev/null)" = created ] && docker rm -f "$j" >/dev/null 2>&1
	exit "$rc"
fi
echo "launched $id"
`, d.runArgs(spec))
	return b.String()
}

func (d *docker) submit(ctx context.Context, inst platform.Instance, spec jobSpec) (launch, error) {
	res, err := d.s.runSubmit(ctx, inst, spec, d.submitScript(spec), "container")
	if err != nil {
		return launch{}, err
	}
	if res.ExitCode != 0 {
		return launch{}, d.launchError(inst, spec.ID, res)
	}
	adopted, id, ok := launched(res.Stdout)
	if !ok || id == "" {
		return launch{}, d.s.fail(ClassLaunchFailed, nil, "container %s on %s: docker run did not print a container id", spec.ID, inst.Name)
	}
	return launch{Adopted: adopted, Ref: "container " + shortID(id)}, nil
}

// launchError explains a failed submit script; docker run's own exit
// codes 125, 126 and 127 are told apart (and kept as the Code).
func (d *docker) launchError(inst platform.Instance, id string, res platform.Result) *Error {
	why := d.s.dockerError(res.Stderr)
	code := res.ExitCode
	switch code {
	case exitNoSecret:
		return d.s.fail(ClassLaunchFailed, nil, "container %s on %s: the job's secrets did not arrive on stdin", id, inst.Name)
	case exitNoDockerCLI:
		return d.s.fail(ClassLaunchFailed, nil, "container %s: docker is not installed on %s", id, inst.Name)
	case exitNoDaemon:
		return d.s.fail(ClassLaunchFailed, nil, "container %s on %s: %s", id, inst.Name, why)
	case 125:
		return d.s.failCode(ClassLaunchFailed, code, "container %s on %s: docker could not start the container (exit code 125): %s", id, inst.Name, why)
	case 126:
		return d.s.failCode(ClassLaunchFailed, code, "container %s on %s: the container's command cannot be invoked (exit code 126): %s", id, inst.Name, why)
	case 127:
		return d.s.failCode(ClassLaunchFailed, code, "container %s on %s: the container's command was not found (exit code 127): %s", id, inst.Name, why)
	}
	if why == "" {
		why = fmt.Sprintf("the launch script exited with code %d", code)
	}
	return d.s.fail(ClassLaunchFailed, nil, "container %s on %s: %s", id, inst.Name, why)
}

// dockerError picks the line of a docker command's stderr that says what
// went wrong: the last one that is not the "Run 'docker run --help'" hint
// or a warning.
func (s *Steps) dockerError(stderr []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "Run '") || strings.HasPrefix(l, "WARNING") {
			continue
		}
		return s.redact.Clip(strings.TrimPrefix(l, "docker: "), 300)
	}
	return s.lastLine(stderr)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// inspectFormat is the one docker inspect of a poll: a line per container
// that exists (its error as a JSON string, so it stays one line).
const inspectFormat = `@inspect {{.Name}} {{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}} {{.State.StartedAt}} {{json .State.Error}}`

// statusScript observes probes in one round trip and one docker inspect:
//
//	@now UNIX-SECONDS
//	@inspect /NAME STATUS CODE OOMKILLED STARTED "ERROR"   (per container found)
//
// then per probe "@job INDEX CANCELED SIZE N", N log bytes (docker logs,
// stdout and stderr merged, from the probe's offset) and
// "@status MTIME LINE" (the last line of status.json, MTIME its age mark).
// An inspect that fails for another reason than a missing container (the
// daemon is down) fails the poll instead of reading as "gone".
//
// The log is not read whole at every poll (seconds per poll for a log of
// tens of MB, and again for every chunk): the first poll of a running
// container starts a follower, docker logs -f copying the log into the
// job's directory on the instance, detached (setsid) and alone (it holds a
// flock while it runs: lock busy, exit 75, means followed), and later polls
// read the copy from their offset. The follower writes its exit status
// when the container has stopped and it has copied everything; a poll that
// sees the container stopped waits for that (a few seconds at most) and
// then reads the copy to its end. The copy is also whole where docker
// rotates its log files (json-file max-size), which drops the head of what
// docker logs gives. Without a follower's finished copy — no setsid or
// flock (util-linux), flock failing for another reason than a busy lock,
// the follower gone — the stopped container's log is read whole once and
// kept, and a running one's at every poll (and a created or removing
// one's, not kept).
func (d *docker) statusScript(probes []probe) string {
	var b strings.Builder
	b.WriteString(dockerCheck)
	b.WriteString(`t=$(mktemp "${TMPDIR:-/tmp}/taoflow-poll.XXXXXX") || exit 1
trap 'rm -f "$t" "$t.e" "$t.i"' EXIT
echo "@now $(date +%s)"
`)
	fmt.Fprintf(&b, "docker inspect --type container --format %s", shellquote.Quote(inspectFormat))
	for _, p := range probes {
		b.WriteString(" " + shellquote.Quote(p.ID))
	}
	fmt.Fprintf(&b, ` > "$t.i" 2> "$t.e"
cat "$t.i"
if grep -v -e '^[[:space:]]*$' -e 'No such' "$t.e" >&2; then exit 3; fi
follow=0
command -v setsid >/dev/null 2>&1 && command -v flock >/dev/null 2>&1 && follow=1
tf_log() {
	d="$HOME"/%[1]s/"$1"
	f="$d/%[4]s"
	case $(awk -v n="/$1" '$1 == "@inspect" && $2 == n { print $3; exit }' "$t.i") in
	running|paused|restarting)
		rm -f "$d/%[5]s.whole"
		if [ "$follow" = 1 ] && mkdir -p "$d" 2>/dev/null; then
			flock -n -E 75 "$f.lock" true 2>/dev/null
			case $? in
			75) return 0;;
			0) setsid flock -n "$f.lock" sh -c 'rm -f "$2.end"; docker logs -f "$1" > "$2" 2>&1; echo $? > "$2.end"' taoflow-log "$1" "$f" < /dev/null > /dev/null 2>&1 &;;
			esac
		fi;;
	'') f="$t"; : > "$t"; return 0;;
	exited|dead)
		if [ "$follow" = 1 ] && [ -f "$f" ]; then
			i=0
			while [ "$i" -lt 5 ] && [ ! -f "$f.end" ]; do
				flock -n -E 75 "$f.lock" true 2>/dev/null
				[ $? -eq 75 ] || break
				sleep 1
				i=$((i + 1))
			done
			[ "$(cat "$f.end" 2>/dev/null)" = 0 ] && return 0
		fi
		f="$d/%[5]s"
		[ -f "$f.whole" ] && return 0
		if mkdir -p "$d" 2>/dev/null && docker logs "$1" > "$f.tmp" 2>&1 && mv -f "$f.tmp" "$f"; then
			: > "$f.whole"
			return 0
		fi
		rm -f "$f.tmp";;
	esac
	f="$t"
	docker logs "$1" > "$t" 2>&1 || : > "$t"
}
tf_poll() {
	c=0
	[ -f "$HOME"/%[1]s/"$2"/canceled ] && c=1
	tf_log "$2"
	size=$(wc -c < "$f" 2>/dev/null | tr -dc 0-9)
	size=${size:-0}
	n=$((size - $3))
	[ "$n" -lt 0 ] && n=0
	[ "$n" -gt %[2]d ] && n=%[3]d
	printf '@job %%s %%s %%s %%s\n' "$1" "$c" "$size" "$n"
	[ "$n" -gt 0 ] && tail -c +$(($3 + 1)) "$f" | head -c "$n"
	st= mt=0
	if [ -n "$4" ] && [ -f "$4/status.json" ]; then
		mt=$(date -r "$4/status.json" +%%s 2>/dev/null || echo 0)
		st=$(tail -n 1 "$4/status.json" | head -c 4096 | tr -d '\r\n')
	fi
	printf '@status %%s %%s\n' "$mt" "$st"
}
`, shellquote.Quote(jobsDir), logChunk, logChunk, followFile, wholeFile)
	for i, p := range probes {
		results := "''"
		if p.Results != "" {
			results = shellPath(p.Results)
		}
		fmt.Fprintf(&b, "tf_poll %d %s %d %s\n", i, shellquote.Quote(p.ID), p.Offset, results)
	}
	return b.String()
}

// Files in a container job's directory on the instance (statusScript):
// the follower's copy of the running container's log, and the whole log of
// a stopped one. Both go when the container does.
const (
	followFile = "docker.follow"
	wholeFile  = "docker.log"
)

// dropLogs is a shell line that removes the log files of the container
// named by the shell variable n.
var dropLogs = fmt.Sprintf(`rm -f "$HOME"/%s/"$n"/docker.*`, shellquote.Quote(jobsDir))

// inspected is one container's state from docker inspect.
type inspected struct {
	Status    string
	ExitCode  int
	OOMKilled bool
	StartedAt time.Time // zero when it never started
	Error     string
}

func (d *docker) status(ctx context.Context, inst platform.Instance, probes []probe) ([]observation, error) {
	res, err := d.s.exec(ctx, inst, d.statusScript(probes), nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		why := d.s.dockerError(res.Stderr)
		if res.ExitCode == exitNoDockerCLI {
			why = "docker is not installed"
		}
		return nil, fmt.Errorf("polling containers on %s: exit code %d: %s", inst.Name, res.ExitCode, d.s.redact.Redact(why))
	}
	obs, missing, err := parseDockerStatus(res.Stdout, probes)
	if err != nil {
		return nil, fmt.Errorf("polling containers on %s: %w", inst.Name, err)
	}
	if len(missing) > 0 {
		if err := d.reconcile(ctx, inst, probes, obs, missing); err != nil {
			return nil, err
		}
	}
	return obs, nil
}

// parseDockerStatus reads the output of statusScript. It returns the
// indexes of the probes whose container docker inspect did not find.
func parseDockerStatus(out []byte, probes []probe) ([]observation, []int, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	var now int64
	found := map[string]inspected{}
	obs := make([]observation, len(probes))
	var missing []int
	for i, p := range probes {
		var header string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return nil, nil, fmt.Errorf("job %d: output ended early", i)
			}
			l = strings.TrimSuffix(l, "\n")
			switch {
			case strings.HasPrefix(l, "@job "):
				header = l
			case strings.HasPrefix(l, "@now ") && i == 0:
				now, _ = strconv.ParseInt(strings.TrimPrefix(l, "@now "), 10, 64)
			case strings.HasPrefix(l, "@inspect ") && i == 0:
				name, st, err := parseInspect(l)
				if err != nil {
					return nil, nil, err
				}
				found[name] = st
			}
			if header != "" {
				break
			}
		}
		f := strings.Fields(header)
		if len(f) != 5 || f[1] != strconv.Itoa(i) {
			return nil, nil, fmt.Errorf("job %d: unexpected header %q", i, header)
		}
		var nums [2]int64
		for k, s := range f[3:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				return nil, nil, fmt.Errorf("job %d: bad number %q", i, s)
			}
			nums[k] = v
		}
		size, chunk := nums[0], nums[1]
		o := &obs[i]
		o.Canceled = f[2] == "1"
		o.Log = make([]byte, chunk)
		if _, err := io.ReadFull(r, o.Log); err != nil {
			return nil, nil, fmt.Errorf("job %d: log ended after %d bytes, want %d", i, len(o.Log), chunk)
		}
		o.More = size > p.Offset+chunk
		l, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(l, "@status ") {
			return nil, nil, fmt.Errorf("job %d: missing status line after the log", i)
		}
		mtime, line, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(l, "@status "), "\n"), " ")
		st, ok := found[p.ID]
		if !ok {
			missing = append(missing, i)
			continue
		}
		mapContainer(o, st, now)
		if mt, err := strconv.ParseInt(mtime, 10, 64); err == nil && !st.StartedAt.IsZero() && mt > 0 && mt < st.StartedAt.Unix() {
			line = "" // written by an earlier attempt
		}
		o.Status = line
	}
	return obs, missing, nil
}

// parseInspect reads one @inspect line.
func parseInspect(l string) (string, inspected, error) {
	f := strings.SplitN(l, " ", 7)
	if len(f) != 7 {
		return "", inspected{}, fmt.Errorf("unexpected inspect line %q", l)
	}
	var st inspected
	st.Status = f[2]
	code, err := strconv.Atoi(f[3])
	if err != nil {
		return "", inspected{}, fmt.Errorf("unexpected exit code in %q", l)
	}
	st.ExitCode = code
	st.OOMKilled = f[4] == "true"
	if t, err := time.Parse(time.RFC3339Nano, f[5]); err == nil && t.Year() > 1 {
		st.StartedAt = t
	}
	if err := json.Unmarshal([]byte(f[6]), &st.Error); err != nil {
		st.Error = f[6]
	}
	return strings.TrimPrefix(f[1], "/"), st, nil
}

// mapContainer sets o's state from docker's (docs/design.md §5.2):
//
//	created              pending (running), or failed start_failed when .State.Error is set
//	running              running
//	paused, restarting   running, with a note (taoflow does neither)
//	exited               exited with its code; OOMKilled is failed "oom"
//	                     (137/143 after a cancel by taoflow: canceled, in jobOutcome)
//	removing             canceled after a cancel by taoflow, else running until it is gone
//	dead                 vanished
//
// now is the instance's clock, for the job's age.
func mapContainer(o *observation, st inspected, now int64) {
	if !st.StartedAt.IsZero() && now > 0 {
		o.Age = time.Duration(max(now-st.StartedAt.Unix(), 0)) * time.Second
	}
	switch st.Status {
	case "created":
		if st.Error != "" {
			o.State, o.Code = stateExited, st.ExitCode
			if o.Code == 0 {
				o.Code = 128
			}
			o.Reason = reasonStartFailed + ": " + st.Error
			return
		}
		o.State, o.Note = stateRunning, "container created, not started yet"
	case "running":
		o.State = stateRunning
	case "paused", "restarting":
		o.State = stateRunning
		o.Note = "container is " + st.Status + " (taoflow neither pauses containers nor sets restart policies: someone on the instance did)"
	case "exited":
		o.State, o.Code = stateExited, st.ExitCode
		if st.OOMKilled {
			o.Reason = reasonOOM
		}
	case "removing":
		if o.Canceled {
			o.State = stateVanished
			return
		}
		o.State, o.Note = stateRunning, "container is being removed"
	case "dead":
		o.State = stateVanished
		o.Reason = "its container is dead (the docker daemon could not stop or remove it)"
		if st.Error != "" {
			o.Reason += ": " + st.Error
		}
	default:
		o.State, o.Note = stateRunning, fmt.Sprintf("container is in an unknown state %q", st.Status)
	}
}

// reconcile decides about containers docker inspect did not find, by
// label (docs/design.md §5.2: never infer an end from absence alone): a container
// labelled tao-job=<job> under another name is reported, not adopted;
// none at all is a vanished job (canceled when taoflow canceled it).
func (d *docker) reconcile(ctx context.Context, inst platform.Instance, probes []probe, obs []observation, missing []int) error {
	script := dockerCheck + fmt.Sprintf("docker ps -a --filter label=%s --format %s\n", labelJob, shellquote.Quote(`{{.Label "`+labelJob+`"}} {{.Names}}`))
	res, err := d.s.exec(ctx, inst, script, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("listing containers on %s by label: exit code %d: %s", inst.Name, res.ExitCode, d.s.dockerError(res.Stderr))
	}
	byLabel := map[string]string{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if job, name, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			byLabel[job] = name
		}
	}
	for _, i := range missing {
		o, id := &obs[i], probes[i].ID
		o.State = stateVanished
		if name, ok := byLabel[id]; ok {
			o.Reason = fmt.Sprintf("its container is now named %s (found by the label %s=%s); taoflow follows containers by name: rename it back (docker rename %s %s) or remove it", name, labelJob, id, name, id)
			continue
		}
		o.Reason = fmt.Sprintf("its container is gone (no container named %s or labelled %s=%s; removed from outside, or the instance was replaced)", id, labelJob, id)
	}
	return nil
}

// markScript marks the containers among ids that still run as canceled
// by taoflow and lists them in $live.
func markScript(ids []string) string {
	var b strings.Builder
	b.WriteString(dockerCheck)
	fmt.Fprintf(&b, "s=$(docker inspect --type container --format '{{.Name}} {{.State.Status}}'")
	for _, id := range ids {
		b.WriteString(" " + shellquote.Quote(id))
	}
	fmt.Fprintf(&b, ` 2>/dev/null)
live=
while read -r n st; do
	n=${n#/}
	case $n in ''|*[!a-zA-Z0-9_.-]*) continue;; esac
	case $st in running|paused|restarting|created) ;; *) continue;; esac
	mkdir -p "$HOME"/%[1]s/"$n" && : > "$HOME"/%[1]s/"$n"/canceled
	live="$live $n"
done <<EOF
$s
EOF
`, shellquote.Quote(jobsDir))
	return b.String()
}

// cancelScript marks the live containers among ids canceled and stops
// them: TERM, then KILL after the grace (docker stop -t). They stay, so
// that their last log lines can still be read; remove removes them.
func (d *docker) cancelScript(ids []string) string {
	return markScript(ids) + fmt.Sprintf(`[ -z "$live" ] && exit 0
echo "stopping container(s)$live (TERM, then KILL after %[1]ds)"
docker stop -t %[1]d $live > /dev/null
`, d.stopSeconds())
}

func (d *docker) cancel(ctx context.Context, inst platform.Instance, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return d.run(ctx, inst, d.cancelScript(ids), "stopping containers")
}

// removeScript removes the containers ids (and their anonymous volumes).
func removeScript(ids []string) string {
	var b strings.Builder
	b.WriteString(dockerCheck)
	b.WriteString("tf_err=$(docker rm -f -v")
	for _, id := range ids {
		b.WriteString(" " + shellquote.Quote(id))
	}
	// rm -f of a container that is gone already fails with older CLIs.
	// Its stderr is kept in a variable, not a file: a fixed name under
	// /tmp could be planted by another user of the instance.
	b.WriteString(` 2>&1 > /dev/null)
printf '%s\n' "$tf_err" | grep -v -e '^[[:space:]]*$' -e 'No such' >&2 && rc=1 || rc=0
`)
	b.WriteString("for n in")
	for _, id := range ids {
		b.WriteString(" " + shellquote.Quote(id))
	}
	b.WriteString("; do " + dropLogs + "; done\n")
	fmt.Fprintf(&b, "[ \"$rc\" -eq 0 ] && echo %s\nexit \"$rc\"\n", shellquote.Quote("removed container(s) "+strings.Join(ids, " ")))
	return b.String()
}

func (d *docker) remove(ctx context.Context, inst platform.Instance, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return d.run(ctx, inst, removeScript(ids), "removing containers")
}

// cleanupScript stops and removes every container labelled
// taoflow.run=<run> and taoflow.instance=<instance> (exactly those values),
// marking those that ran as canceled. An instance without docker has none.
// With removeDirs it removes their job directories too (copies of their
// logs, markers), else only the log copies.
func (d *docker) cleanupScript(instance string, removeDirs bool) string {
	drop := dropLogs
	if removeDirs {
		drop = fmt.Sprintf(`rm -rf "$HOME"/%s/"$n"`, shellquote.Quote(jobsDir))
	}
	return fmt.Sprintf(`command -v docker >/dev/null 2>&1 || exit 0
all=$(docker ps -a --filter label=%[1]s --filter label=%[5]s --format '{{.Names}} {{.State}}') || { echo 'cannot list the containers (is the docker daemon running?)' >&2; exit %[2]d; }
live= names=
while read -r n st; do
	case $n in ''|*[!a-zA-Z0-9_.-]*) continue;; esac
	names="$names $n"
	case $st in running|paused|restarting)
		mkdir -p "$HOME"/%[3]s/"$n" && : > "$HOME"/%[3]s/"$n"/canceled
		live="$live $n";;
	esac
done <<EOF
$all
EOF
if [ -n "$live" ]; then
	echo "stopping container(s)$live (TERM, then KILL after %[4]ds)"
	docker stop -t %[4]d $live > /dev/null
fi
[ -z "$names" ] && exit 0
docker rm -f -v $names > /dev/null || exit 1
for n in $names; do %[6]s; done
echo "removed container(s)$names"
`, shellquote.Quote(labelRun+"="+d.s.cfg.RunID), exitNoDaemon, shellquote.Quote(jobsDir), d.stopSeconds(), shellquote.Quote(labelInstance+"="+instance), drop)
}

func (d *docker) cleanup(ctx context.Context, inst platform.Instance) ([]string, error) {
	return d.run(ctx, inst, d.cleanupScript(inst.Name, !d.s.keepJobDirs(inst)), "removing this run's containers")
}

// run runs a stop or remove script and returns its output lines.
func (d *docker) run(ctx context.Context, inst platform.Instance, script, what string) ([]string, error) {
	res, err := d.s.exec(ctx, inst, script, nil)
	if err != nil {
		return nil, err
	}
	lines := outputLines(res.Stdout)
	if res.ExitCode != 0 {
		why := d.s.dockerError(res.Stderr)
		if res.ExitCode == exitNoDockerCLI {
			why = "docker is not installed"
		}
		return lines, fmt.Errorf("%s on %s: exit code %d: %s", what, inst.Name, res.ExitCode, d.s.redact.Redact(why))
	}
	return lines, nil
}
