package steps

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

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

// dockerScript is a container script: scripts/docker-check.sh (without a
// docker CLI the shell's own 127 would read as docker run's "command not
// found"), then the named scripts, with params and the jobs directory.
func dockerScript(params Params, names ...string) string {
	params["tf_exit_nodocker"] = strconv.Itoa(exitNoDockerCLI)
	params["tf_jobs"] = jobsDir
	return script(params, append([]string{"docker-check"}, names...)...)
}

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

// runArgs returns docker run's arguments for spec, in three lists:
// before the volumes, the volumes' values (HOST:CONTAINER[:OPTS], a HOST
// of ~ or ~/… read as $HOME by scripts/docker-submit.sh, which also makes
// a missing host directory), and after them (the image last). The command
// is not among them: it is shell text the instance's shell splits (see
// checkArgv).
func (d *docker) runArgs(spec jobSpec) (head, vols, rest []string) {
	head = []string{"-d", "--name", spec.ID, "--label", labelJob + "=" + spec.ID, "--label", labelRun + "=" + d.s.cfg.RunID}
	if spec.Instance != "" {
		head = append(head, "--label", labelInstance+"="+spec.Instance)
	}
	head = append(head, "--label", labelOwner+"="+d.s.cfg.Owner)
	switch {
	case spec.GPUs == "" || spec.GPUs == "0":
	case strings.Contains(spec.GPUs, ","):
		// docker reads --gpus as CSV: a device list is one quoted field.
		head = append(head, "--gpus", `"`+spec.GPUs+`"`)
	default:
		head = append(head, "--gpus", spec.GPUs)
	}
	vols = append(vols, spec.Volumes...)
	seen := map[string]bool{}
	for _, name := range spec.Env {
		if !seen[name] {
			seen[name] = true
			rest = append(rest, "-e", name)
		}
	}
	for _, o := range []struct{ flag, val string }{
		{"-w", spec.Workdir}, {"--ipc", spec.IPC}, {"--shm-size", spec.ShmSize},
		{"--memory", spec.Memory}, {"--user", spec.User},
	} {
		if o.val != "" {
			rest = append(rest, o.flag, o.val)
		}
	}
	rest = append(rest, spec.Image)
	return head, vols, rest
}

// submitScript launches spec's container unless one exists
// (scripts/docker-submit.sh).
func (d *docker) submitScript(spec jobSpec) string {
	head, vols, rest := d.runArgs(spec)
	return dockerScript(Params{
		"tf_job":           spec.ID,
		"tf_label_job":     labelJob,
		"tf_head":          words(head...),
		"tf_vols":          words(vols...),
		"tf_rest":          words(rest...),
		"tf_argv":          strings.TrimSpace(spec.Command),
		"tf_exit_nodaemon": strconv.Itoa(exitNoDaemon),
	}, "docker-submit")
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

// statusScript observes probes in one round trip and one docker inspect
// (scripts/docker-status.sh, which says what it prints and how it follows
// the logs); parseDockerStatus reads its output.
func (d *docker) statusScript(probes []probe) string {
	list := make([]string, 0, 3*len(probes))
	for _, p := range probes {
		list = append(list, p.ID, strconv.FormatInt(p.Offset, 10), p.Results)
	}
	return dockerScript(Params{
		"tf_probes": words(list...),
		"tf_chunk":  strconv.Itoa(logChunk),
		"tf_format": inspectFormat,
		"tf_follow": followFile,
		"tf_whole":  wholeFile,
	}, "home", "stlines", "docker-status")
}

// Files in a container job's directory on the instance (statusScript):
// the follower's copy of the running container's log, and the whole log of
// a stopped one. Both go when the container does.
const (
	followFile = "docker.follow"
	wholeFile  = "docker.log"
)

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

// reconcile decides about containers docker inspect did not find, by
// label (docs/design.md §5.2: never infer an end from absence alone): a container
// labelled tao-job=<job> under another name is reported, not adopted;
// none at all is a vanished job (canceled when taoflow canceled it).
func (d *docker) reconcile(ctx context.Context, inst platform.Instance, probes []probe, obs []observation, missing []int) error {
	script := dockerScript(Params{"tf_label": labelJob, "tf_format": `{{.Label "` + labelJob + `"}} {{.Names}}`, "tf_quiet": "0"}, "docker-labelled")
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

// cancelScript marks the live containers among ids canceled and stops
// them: TERM, then KILL after the grace (docker stop -t). They stay, so
// that their last log lines can still be read; remove removes them
// (scripts/docker-mark.sh and docker-cancel.sh).
func (d *docker) cancelScript(ids []string) string {
	return dockerScript(Params{"tf_ids": words(ids...), "tf_grace": strconv.Itoa(d.stopSeconds())}, "docker-mark", "docker-cancel")
}

func (d *docker) cancel(ctx context.Context, inst platform.Instance, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return d.run(ctx, inst, d.cancelScript(ids), "stopping containers")
}

// removeScript removes the containers ids (and their anonymous volumes):
// scripts/docker-remove.sh.
func removeScript(ids []string) string {
	return dockerScript(Params{"tf_ids": words(ids...)}, "docker-remove")
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
// logs, markers), else only the log copies: scripts/docker-cleanup.sh.
func (d *docker) cleanupScript(instance string, removeDirs bool) string {
	return script(Params{
		"tf_jobs":           jobsDir,
		"tf_run_label":      labelRun + "=" + d.s.cfg.RunID,
		"tf_instance_label": labelInstance + "=" + instance,
		"tf_grace":          strconv.Itoa(d.stopSeconds()),
		"tf_remove_dirs":    boolParam(removeDirs),
		"tf_exit_nodaemon":  strconv.Itoa(exitNoDaemon),
	}, "docker-cleanup")
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
