package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/plan"
)

// Command is one remote command a node runs, as Preview shows it.
type Command struct {
	// What the command is for: "probe", "launch", "poll", ...
	What string `json:"what"`
	// Script is the shell text the instance's shell runs, exactly as sent.
	// It holds secret names, never values.
	Script string `json:"script"`
	// Stdin names the secrets sent on the command's stdin, in the order
	// the script reads them.
	Stdin []string `json:"stdin,omitempty"`
	// Repeats says when the command runs more than once ("every 5s until
	// it prints ok"); empty for once.
	Repeats string `json:"repeats,omitempty"`
}

// Preview returns the remote commands the node of req would run, in order,
// without running anything or needing the secrets' values: the main
// commands of its step, as Do sends them. Commands whose text depends on
// what an earlier one answered (a manifest, a cancel) are left out.
func (s *Steps) Preview(req Request) ([]Command, error) {
	cmds, err := s.preview(req)
	for i := range cmds {
		if cmds[i].Script != probeScript {
			cmds[i].Script = privatePrelude + cmds[i].Script // as exec sends it
		}
	}
	return cmds, err
}

func (s *Steps) preview(req Request) ([]Command, error) {
	switch req.Step.Uses {
	case plan.KindPreflight:
		return s.previewPreflight(req)
	case plan.KindNGCAuth:
		registry, user, key, verify, err := ngcParams(req.With)
		if err != nil {
			return nil, err
		}
		cmds := []Command{s.withSecrets("docker login", loginScript(registry, user, key), []string{key})}
		if verify != "" {
			cmds = append(cmds, Command{What: "check access to " + verify, Script: manifestScript(verify)})
		}
		return cmds, nil
	case plan.KindPull:
		image := withString(req.With, "image")
		if err := checkImage("with.image", image); err != nil {
			return nil, err
		}
		if s.onSlurm() {
			r := &slurmRT{s: s}
			return []Command{{What: "enroot import " + EnrootURI(image) + " into " + r.sqshPath(image) + " unless present", Script: r.slurmPullScript(image)}}, nil
		}
		return []Command{{What: "pull unless present", Script: pullScript(image)}}, nil
	case plan.KindRun:
		spec, rt, noun, err := s.jobSpecFor(req)
		if err != nil {
			return nil, err
		}
		var script string
		switch r := rt.(type) {
		case *docker:
			script = r.submitScript(spec)
		case *process:
			script = r.submitScript(spec)
		case *slurmRT:
			return []Command{s.withSecrets("queue the job: "+r.sbatchLine(req.Instance, spec)+" (or adopt it)", r.submitScript(req.Instance, spec), spec.Env)}, nil
		}
		return []Command{s.withSecrets("launch the "+noun+" (or adopt it)", script, spec.Env)}, nil
	case plan.KindWait:
		return s.previewWait(req)
	case plan.KindUploadS3:
		return s.previewUpload(req)
	case plan.KindSend:
		from, to, patterns, err := s.sendParams(req)
		if err != nil {
			return nil, err
		}
		// The counts as sent when from can be read here (reading this
		// machine touches nothing), else placeholders.
		want := Params{"dst": to, "want_files": "FILES", "want_bytes": "BYTES", "want_links": "LINKS", "want_digest": "DIGEST"}
		if excludes, err := excludeMatchers(patterns); err == nil {
			if _, t, _, err := s.sendFiles(context.Background(), from, excludes); err == nil {
				f, b, l := t.counts()
				want["want_files"], want["want_bytes"], want["want_links"] = strconv.FormatInt(f, 10), strconv.FormatInt(b, 10), strconv.FormatInt(l, 10)
				want["want_digest"] = t.digest()
			}
		}
		return []Command{
			{What: "unless " + to + " already lists as " + from + " (a digest of its listing), extract the archive of " + from + " (streamed on stdin) next to " + to + ", check its counts, rename it into place",
				Script: script(want, "send")},
		}, nil
	case plan.KindFetch:
		from, to, err := s.fetchParams(req)
		if err != nil {
			return nil, err
		}
		return []Command{
			{What: "list " + from + " (nothing is fetched when " + to + " holds the same files)", Script: script(Params{"path": from}, "list")},
			{What: "archive " + from + " to stdout, extracted next to " + to + " here, checked against the listing and renamed into place", Script: script(Params{"src": from}, "fetch")},
		}, nil
	case plan.KindDownloadS3:
		params, names, _, err := s.downloadParams(req)
		if err != nil {
			return nil, err
		}
		params["list"] = ""
		if params["bucket"] == "" {
			return []Command{s.withSecrets("copy, then list the source and the destination (verify every file and size)", script(params, "download"), names)}, nil
		}
		sync := s.withSecrets("aws s3 sync, then list the destination (verify that each object the sync copied is a file there)", script(params, "download"), names)
		params["list"] = "1"
		list := s.withSecrets("only when the sync copied nothing (a resume) or printed a line that cannot be read: list the bucket and the destination (verify every file and size)", script(params, "download"), names)
		return []Command{sync, list}, nil
	case plan.KindDelete:
		cmds := []Command{{What: "stop this run's host processes", Script: s.process.(*process).cleanupScript(plan.JobPrefix(s.cfg.RunID), s.cfg.RunID, req.Instance.Name, !s.keepJobDirs(req.Instance))}}
		if s.cfg.Plan == nil || s.cfg.Plan.RunsContainers() {
			cmds = append(cmds, Command{What: "remove this run's containers", Script: s.docker.(*docker).cleanupScript(req.Instance.Name, !s.keepJobDirs(req.Instance))})
		}
		return cmds, nil
	}
	return nil, &Error{Class: ClassUnsupported, Msg: fmt.Sprintf("unknown step kind %q", req.Step.Uses)}
}

// withSecrets is a command whose script is read after the prelude that
// exports the named secrets from stdin (those in platform.instance_env are
// on the instance already).
func (s *Steps) withSecrets(what, script string, names []string) Command {
	c := Command{What: what, Stdin: s.sentSecrets(names)}
	c.Script = readSecrets(c.Stdin) + script
	return c
}

func (s *Steps) previewPreflight(req Request) ([]Command, error) {
	interval, err := withDuration(req.With, "interval", defaultProbeInterval)
	if err != nil {
		return nil, err
	}
	readyTimeout, err := withDuration(req.With, "ready_timeout", defaultReadyTimeout)
	if err != nil {
		return nil, err
	}
	gpus, err := withInt(req.With, "gpus")
	if err != nil {
		return nil, err
	}
	docker, set, err := withBool(req.With, "docker")
	if err != nil {
		return nil, err
	}
	if !set {
		docker = s.cfg.Plan != nil && s.cfg.Plan.RunsContainers()
	}
	cmds := []Command{{What: "probe", Script: probeScript, Repeats: fmt.Sprintf("every %s until it prints ok, up to %s", interval, readyTimeout)}}
	if s.onSlurm() {
		return append(cmds, Command{What: "check the pool against the cluster (partition, MaxTime, GPUs, sbatch --test-only)", Script: s.slurmPreflightScript(req)}), nil
	}
	if docker {
		cmds = append(cmds, Command{What: "check docker", Script: dockerInfoScript})
	}
	if want, count, _ := s.preflightGPUs(req, gpus); count {
		cmds = append(cmds, Command{What: fmt.Sprintf("count the GPUs (at least %d)", want), Script: gpuScript})
	}
	if a, cmd := s.autostopFor(req.Instance.Name); a != nil {
		cmds = append(cmds, Command{What: "arm the autostop (" + a.Describe() + ")", Script: s.armScript(req.Instance, a, cmd)})
	}
	return cmds, nil
}

func (s *Steps) previewWait(req Request) ([]Command, error) {
	interval, err := withDuration(req.With, "interval", s.cfg.PollInterval)
	if err != nil {
		return nil, err
	}
	if len(req.Jobs) == 0 {
		return nil, &Error{Class: ClassInvalidConfig, Msg: "a wait step needs the jobs of a run step (needs: a run step)"}
	}
	var containers, processes []probe
	for _, j := range req.Jobs {
		p := probe{ID: j.ID, Results: j.Results}
		if j.Image != "" {
			containers = append(containers, p)
		} else {
			processes = append(processes, p)
		}
	}
	every := fmt.Sprintf("every %s until the jobs end (one command per instance for all its jobs)", interval)
	var cmds []Command
	if s.onSlurm() {
		all := append(processes, containers...)
		return []Command{{What: "poll the Slurm jobs (one squeue for all)", Script: s.slurm.(*slurmRT).statusScript(all), Repeats: every}}, nil
	}
	if len(processes) > 0 {
		cmds = append(cmds, Command{What: "poll the jobs", Script: s.process.(*process).statusScript(processes), Repeats: every})
	}
	if len(containers) > 0 {
		cmds = append(cmds, Command{What: "poll the containers", Script: s.docker.(*docker).statusScript(containers), Repeats: every})
	}
	return cmds, nil
}

func (s *Steps) previewUpload(req Request) ([]Command, error) {
	from, to := withString(req.With, "from"), withString(req.With, "to")
	if from == "" || to == "" {
		return nil, &Error{Class: ClassInvalidConfig, Msg: "upload-s3 needs with.from and with.to"}
	}
	if strings.HasPrefix(to, "s3://") {
		dest, excludes, _, err := s3Target(req.With, to)
		if err != nil {
			return nil, err
		}
		names := withList(req.With, "env")
		if names == nil {
			names = defaultAWSEnv
		}
		return []Command{
			s.withSecrets("sync", syncScript(from, dest, excludes), names),
			{What: "list the source", Script: sourceScript(from)},
			s.withSecrets("list the destination (verify count and bytes)", listScript(dest), names),
			s.withSecrets("write "+manifestName, putScript(dest, []byte("<the run's manifest, JSON>")), names),
		}, nil
	}
	if !strings.HasPrefix(to, "file://") {
		return nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q must start with s3:// or file://", to)}
	}
	dest, err := s.fileTarget(to)
	if err != nil {
		return nil, err
	}
	return []Command{{What: "copy and count", Script: copyScript(from, dest)}}, nil
}
