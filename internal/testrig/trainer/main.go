package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stepsPerEpoch is the fake number of optimiser steps in one epoch.
const stepsPerEpoch = 10

// config is the parsed command line.
type config struct {
	epochs     int
	sleep      time.Duration
	results    string
	failCode   int
	failAt     int
	ignoreTerm bool
	oomMB      int
	printEnv   names
	hang       bool
	logMB      int
	waitFor    string
}

// names is a repeatable string flag.
type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "trainer:", err)
		return 2
	}

	// Install the handler before announcing the start: a test waits for the
	// "started" line before it sends SIGTERM, and PID 1 in a container
	// ignores signals it has no handler for.
	term := make(chan os.Signal, 1)
	if cfg.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	}
	fmt.Fprintf(stdout, "trainer: started epochs=%d results=%s\n", cfg.epochs, cfg.results)

	for _, name := range cfg.printEnv {
		if v, ok := os.LookupEnv(name); ok {
			fmt.Fprintf(stdout, "%s has %d bytes\n", name, len(v))
		} else {
			fmt.Fprintf(stdout, "%s is unset\n", name)
		}
	}

	if cfg.logMB > 0 {
		w := bufio.NewWriterSize(stdout, 64<<10)
		for i, n := 0, 0; n < cfg.logMB<<20; i++ {
			k, _ := fmt.Fprintf(w, "Epoch 0/0 Step %d: loss=0.5 lr=0.001 (a long training's log line)\n", i)
			n += k
		}
		_ = w.Flush()
	}

	if cfg.oomMB > 0 {
		fmt.Fprintf(stdout, "trainer: allocating %d MiB\n", cfg.oomMB)
		hog := make([]byte, cfg.oomMB<<20)
		for i := 0; i < len(hog); i += 4096 {
			hog[i] = 1
		}
		fmt.Fprintf(stdout, "trainer: allocated %d MiB\n", cfg.oomMB)
		defer func() { _ = hog[len(hog)-1] }() // keep it alive
	}

	if err := os.MkdirAll(cfg.results, 0o755); err != nil {
		fmt.Fprintln(stderr, "trainer:", err)
		return 1
	}
	status, err := os.OpenFile(filepath.Join(cfg.results, "status.json"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "trainer:", err)
		return 1
	}
	defer status.Close()

	failing := cfg.failCode != 0 || cfg.failAt >= 0
	code := cfg.failCode
	if cfg.failAt >= 0 && code == 0 {
		code = 1
	}
	if cfg.waitFor != "" {
		fmt.Fprintf(stdout, "trainer: waiting for %s\n", cfg.waitFor)
		if code, done := waitFor(cfg.waitFor, term, stdout); done {
			return code
		}
	}
	start := time.Now()
	for epoch := 1; epoch <= cfg.epochs; epoch++ {
		if failing && cfg.failAt >= 0 && epoch > cfg.failAt {
			break
		}
		epochStart := time.Now()
		select {
		case <-term:
			fmt.Fprintln(stdout, "trainer: SIGTERM, exiting 143")
			return 143
		case <-time.After(cfg.sleep):
		}
		perEpoch := time.Since(epochStart)
		eta := perEpoch * time.Duration(cfg.epochs-epoch)
		loss := 1.0 / float64(epoch+1)
		st := "RUNNING"
		msg := "Training loop in progress"
		if epoch == cfg.epochs && !failing && !cfg.hang {
			st, msg = "SUCCESS", "Training loop complete."
		}
		line := statusLine([]field{
			{"epoch", epoch},
			{"max_epoch", cfg.epochs},
			{"time_per_epoch", timedelta(perEpoch)},
			{"eta", timedelta(eta)},
		}, st, msg, loss)
		if err := appendSync(status, line); err != nil {
			fmt.Fprintln(stderr, "trainer:", err)
			return 1
		}
		ckpt := filepath.Join(cfg.results, fmt.Sprintf("model_epoch_%03d_step_%05d.pth", epoch-1, epoch*stepsPerEpoch))
		if err := writeSync(ckpt, fmt.Sprintf("fake checkpoint epoch %d loss %.4f\n", epoch, loss)); err != nil {
			fmt.Fprintln(stderr, "trainer:", err)
			return 1
		}
		fmt.Fprintf(stdout, "Epoch %d/%d: loss=%.4f time_per_epoch=%s eta=%s\n", epoch, cfg.epochs, loss, timedelta(perEpoch), timedelta(eta))
	}

	if failing {
		line := statusLine(nil, "FAILURE", fmt.Sprintf("Training failed with exit code %d.", code), 0)
		if err := appendSync(status, line); err != nil {
			fmt.Fprintln(stderr, "trainer:", err)
		}
		fmt.Fprintf(stderr, "trainer: failing with exit code %d\n", code)
		return code
	}
	if cfg.hang {
		fmt.Fprintln(stdout, "trainer: hanging")
		for {
			// A pending timer keeps the runtime from calling a bare channel
			// receive a deadlock when -ignore-term leaves term silent;
			// then only SIGKILL ends the process.
			select {
			case <-term:
				fmt.Fprintln(stdout, "trainer: SIGTERM, exiting 143")
				return 143
			case <-time.After(time.Hour):
			}
		}
	}
	fmt.Fprintf(stdout, "trainer: done in %s\n", time.Since(start).Round(time.Millisecond))
	return 0
}

// waitFor blocks until path exists (a test's gate: it orders the job's end
// after an event the test has seen). A SIGTERM ends the wait and the run.
func waitFor(path string, term <-chan os.Signal, stdout io.Writer) (code int, done bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return 0, false
		}
		select {
		case <-term:
			fmt.Fprintln(stdout, "trainer: SIGTERM, exiting 143")
			return 143, true
		case <-tick.C:
		}
	}
}

func parse(args []string, stderr io.Writer) (config, error) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return parseTAO(args)
	}
	var cfg config
	fs := flag.NewFlagSet("trainer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.epochs, "epochs", 2, "epochs to run")
	fs.DurationVar(&cfg.sleep, "sleep", 100*time.Millisecond, "time per epoch")
	fs.StringVar(&cfg.results, "results", "/results", "results directory")
	fs.IntVar(&cfg.failCode, "fail-code", 0, "exit with this code after the epochs (or at -fail-at)")
	fs.IntVar(&cfg.failAt, "fail-at", -1, "fail after this many epochs completed")
	fs.BoolVar(&cfg.ignoreTerm, "ignore-term", false, "ignore SIGTERM")
	fs.IntVar(&cfg.oomMB, "oom-mb", 0, "allocate and touch this many MiB first")
	fs.Var(&cfg.printEnv, "print-env", "print the length of this environment variable (repeatable)")
	fs.BoolVar(&cfg.hang, "hang", false, "wait for a signal after the epochs")
	fs.IntVar(&cfg.logMB, "log-mb", 0, "print this many MiB of log lines first (a long training's log)")
	fs.StringVar(&cfg.waitFor, "wait-for", "", "wait until this file exists before the first epoch")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "TRAINER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
		}
	})
	if envErr != nil {
		return cfg, envErr
	}
	if cfg.epochs < 0 || cfg.oomMB < 0 || cfg.logMB < 0 {
		return cfg, fmt.Errorf("-epochs, -oom-mb and -log-mb must not be negative")
	}
	return cfg, nil
}

// parseTAO reads a TAO Toolkit command line, as an example plan writes it:
//
//	visual_changenet train -e /data/spec.yaml results_dir=/results/x train.num_epochs=3 train.optim.lr=0.01
//
// results_dir and train.num_epochs set the results directory and epochs;
// trainer.sleep, trainer.fail_code, trainer.fail_at, trainer.oom_mb and
// trainer.wait_for (a file to wait for before the first epoch) are the test
// knobs of the flag form; other overrides are accepted and
// ignored, as a spec file's keys would be. -e names a spec file, which
// need not exist.
func parseTAO(args []string) (config, error) {
	cfg := config{epochs: 2, sleep: 100 * time.Millisecond, results: "/results", failAt: -1}
	if len(args) < 2 || args[1] != "train" {
		return cfg, fmt.Errorf("usage: MODEL train [-e SPEC] [key=value...], got %q", args)
	}
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "-e" || a == "--experiment_spec_file" {
			i++ // the spec file: its keys come as overrides here
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return cfg, fmt.Errorf("unexpected argument %q (want key=value)", a)
		}
		var err error
		switch k {
		case "results_dir":
			cfg.results = v
		case "train.num_epochs":
			cfg.epochs, err = strconv.Atoi(v)
		case "trainer.sleep":
			cfg.sleep, err = time.ParseDuration(v)
		case "trainer.fail_code":
			cfg.failCode, err = strconv.Atoi(v)
		case "trainer.fail_at":
			cfg.failAt, err = strconv.Atoi(v)
		case "trainer.oom_mb":
			cfg.oomMB, err = strconv.Atoi(v)
		case "trainer.wait_for":
			cfg.waitFor = v
		}
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", a, err)
		}
	}
	if cfg.epochs < 0 || cfg.oomMB < 0 {
		return cfg, fmt.Errorf("train.num_epochs and trainer.oom_mb must not be negative")
	}
	return cfg, nil
}

// field is one key of a status line, kept in order.
type field struct {
	key   string
	value any
}

// statusLine renders a status.json line the way TAO's StatusLogger does:
// data fields, then date, time, status, verbosity, message and kpi, joined
// with Python's json.dumps separators.
func statusLine(data []field, status, message string, loss float64) string {
	now := time.Now()
	fields := append(data,
		field{"date", fmt.Sprintf("%d/%d/%d", int(now.Month()), now.Day(), now.Year())},
		field{"time", fmt.Sprintf("%d:%d:%d", now.Hour(), now.Minute(), now.Second())},
		field{"status", status},
		field{"verbosity", "INFO"},
		field{"message", message},
	)
	if loss != 0 {
		fields = append(fields, field{"kpi", rawJSON(`{"loss": ` + strconv.FormatFloat(loss, 'g', -1, 64) + `}`)})
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteString(": ")
		if r, ok := f.value.(rawJSON); ok {
			b.WriteString(string(r))
			continue
		}
		v, _ := json.Marshal(f.value)
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.String()
}

// rawJSON is a value already rendered as JSON.
type rawJSON string

// timedelta renders d like Python's str(datetime.timedelta): H:MM:SS with
// microseconds when there are any.
func timedelta(d time.Duration) string {
	us := d.Microseconds()
	h := us / 3_600_000_000
	m := us / 60_000_000 % 60
	s := us / 1_000_000 % 60
	frac := us % 1_000_000
	if frac == 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d:%02d.%06d", h, m, s, frac)
}

func appendSync(f *os.File, line string) error {
	if _, err := f.WriteString(line); err != nil {
		return err
	}
	return f.Sync()
}

func writeSync(path, content string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
