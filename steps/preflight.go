package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Defaults of a preflight step.
const (
	defaultProbeInterval = 5 * time.Second
	defaultReadyTimeout  = 10 * time.Minute
)

// probeScript is the readiness probe: two words, answered by any shell,
// sent as they are (no prelude, no file under scripts/: it creates
// nothing and must work on an instance that has just booted).
const probeScript = "echo ok"

// preflight waits until the instance runs commands, then checks Docker and
// the GPUs where asked.
func (s *Steps) preflight(ctx context.Context, req Request) error {
	interval, err := withDuration(req.With, "interval", defaultProbeInterval)
	if err != nil {
		return err
	}
	readyTimeout, err := withDuration(req.With, "ready_timeout", defaultReadyTimeout)
	if err != nil {
		return err
	}
	gpus, err := withInt(req.With, "gpus")
	if err != nil {
		return err
	}
	docker, set, err := withBool(req.With, "docker")
	if err != nil {
		return err
	}
	if !set {
		docker = s.cfg.Plan != nil && s.cfg.Plan.RunsContainers()
	}
	if err := s.waitReady(ctx, req, interval, readyTimeout); err != nil {
		return err
	}
	if docker {
		if err := s.checkDocker(ctx, req); err != nil {
			return err
		}
	}
	if want, count, why := s.preflightGPUs(req, gpus); count {
		if err := s.checkGPUs(ctx, req, want, why); err != nil {
			return err
		}
	}
	return s.armAutostop(ctx, req)
}

// waitReady polls the probe every interval until it prints exactly "ok" or
// readyTimeout passes.
func (s *Steps) waitReady(ctx context.Context, req Request, interval, readyTimeout time.Duration) error {
	inst := req.Instance
	fmt.Fprintf(req.Log, "waiting for %s to run commands (probe every %s, up to %s)\n", inst.Name, interval, readyTimeout)
	start := time.Now()
	pctx, cancel := context.WithTimeoutCause(ctx, readyTimeout, errors.New("ready_timeout passed"))
	defer cancel()
	var last string
	for attempt := 1; ; attempt++ {
		res, err := s.exec(pctx, inst, probeScript, nil)
		var why string
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case pctx.Err() != nil:
			why = "the probe did not answer before ready_timeout"
		case err != nil:
			why = err.Error()
		case res.ExitCode != 0:
			why = fmt.Sprintf("the probe exited with code %d: %s", res.ExitCode, s.lastLine(res.Stderr))
		case string(bytes.TrimSuffix(res.Stdout, []byte("\n"))) != "ok":
			why = fmt.Sprintf("the probe printed %q, want \"ok\"", s.redact.Clip(string(res.Stdout), 80))
		default:
			fmt.Fprintf(req.Log, "%s answered after %s (%s)\n", inst.Name, time.Since(start).Round(time.Millisecond), counted(attempt, "probe"))
			return nil
		}
		why = s.redact.Redact(why)
		if why != last {
			fmt.Fprintf(req.Log, "not ready yet: %s\n", why)
			last = why
		}
		if pctx.Err() != nil || !sleep(pctx, interval) {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return s.fail(ClassNotReachable, err, "%s did not answer the probe within %s (%s; last: %s)", inst.Name, readyTimeout, counted(attempt, "probe"), last)
		}
	}
}

// checkDocker runs docker info.
func (s *Steps) checkDocker(ctx context.Context, req Request) error {
	inst := req.Instance
	fmt.Fprintf(req.Log, "checking docker on %s\n", inst.Name)
	res, err := s.exec(ctx, inst, dockerInfoScript, nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "checking docker on %s: %v", inst.Name, err)
	case res.ExitCode == 127:
		return s.fail(ClassNoDocker, nil, "docker is not installed on %s", inst.Name)
	case res.ExitCode != 0:
		return s.fail(ClassNoDocker, nil, "docker info failed on %s (exit code %d): %s", inst.Name, res.ExitCode, s.lastLine(res.Stderr))
	}
	fmt.Fprintf(req.Log, "docker works on %s\n", inst.Name)
	return nil
}

// dockerInfoScript checks that docker works (scripts/docker-info.sh).
var dockerInfoScript = script(nil, "docker-info")

// gpuScript lists the GPUs, exiting 127 when there is no nvidia-smi
// (scripts/gpus.sh).
var gpuScript = script(nil, "gpus")

// checkGPUs counts the GPUs nvidia-smi -L lists, requires at least want
// (why says what for), and records the count (RecordGPUs) for
// gpus: per-slot.
func (s *Steps) checkGPUs(ctx context.Context, req Request, want int, why string) error {
	inst := req.Instance
	fmt.Fprintf(req.Log, "checking for at least %s on %s (nvidia-smi -L)\n", counted(want, "GPU"), inst.Name)
	res, err := s.exec(ctx, inst, gpuScript, nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "checking GPUs on %s: %v", inst.Name, err)
	case res.ExitCode == 127:
		return s.fail(ClassTooFewGPUs, nil, "nvidia-smi is not installed on %s (no NVIDIA driver?); wanted %s", inst.Name, counted(want, "GPU"))
	case res.ExitCode != 0:
		return s.fail(ClassTooFewGPUs, nil, "nvidia-smi -L failed on %s (exit code %d): %s; wanted %s", inst.Name, res.ExitCode, s.lastLine(append(res.Stderr, res.Stdout...)), counted(want, "GPU"))
	}
	n := countGPUs(res.Stdout)
	if n < want {
		return s.fail(ClassTooFewGPUs, nil, "%s has %s, wanted at least %d%s", inst.Name, counted(n, "GPU"), want, why)
	}
	s.noteGPUs(inst, n)
	if req.Record != nil {
		req.Record(RecordGPUs, strconv.Itoa(n))
	}
	fmt.Fprintf(req.Log, "%s has %s\n", inst.Name, counted(n, "GPU"))
	return nil
}

var gpuLine = regexp.MustCompile(`(?m)^GPU \d+:`)

// countGPUs counts the lines of nvidia-smi -L output that name a GPU
// ("GPU 0: NVIDIA H200 (UUID: ...)"); MIG devices, indented below their
// GPU, are not counted.
func countGPUs(out []byte) int {
	return len(gpuLine.FindAll(out, -1))
}

// counted is "1 probe", "3 probes".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
