package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/secret"
)

type applyFlags struct {
	vars     varFlags
	parallel int
	output   string
	finally  time.Duration
	resume   string // a run id (or a prefix), "latest", or "" for a new run
	name     string
	tags     []string
	clean    bool
	yes      bool   // create billed instances without asking
	brev     string // --brev-binary: the brev CLI the user names
	report   string // --report: the run's report, written at its end
	// detach: --detach; detachedRun: the run the background process of
	// an apply --detach runs (hidden --detached-run); detachOnHangup:
	// --detach-on-hangup (detach.go).
	detach         bool
	detachedRun    string
	detachOnHangup bool
}

func newApplyCmd(sio stdio, g *globals) *cobra.Command {
	f := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply PLAN",
		Short: "Run a plan, and tear down what it created whatever happens",
		Long: `Apply checks PLAN, reads the secrets it declares from the environment, and
runs its nodes concurrently over the instances' free slots. Every instance,
job and process is recorded in the state directory before it is created, so
'taoflow status', 'taoflow logs' and 'taoflow destroy' can see it even after a
crash.

Finalizers (finally:) run after the steps of their instance have ended,
whatever happened, and instances this run created are released as soon as no
remaining node needs them.

Ctrl-C once: start no more nodes, cancel running ones, tear down. Twice: show
what teardown is still doing. Three times: abandon teardown (exit 3) and
print the 'taoflow destroy' command that finishes it.

Output: --output auto shows a live table on a terminal and timestamped lines
otherwise; plain forces the lines; json (also --json, -o json) prints one
event per line, the run's outcome and exit code last (docs/json.md).

--resume [RUN] continues a run whose apply died (kill -9, power loss, a
closed laptop) or ended: the plan file must be the same (its hash is
checked) and the run keeps its vars (--var flags are accepted when they
equal them, so the command line that started the run works with --resume
appended; a differing value is refused). Nodes that succeeded are kept, jobs
that still run (or ended) are adopted rather than launched again, instances
the run created and that still exist are used again, and the rest runs.
Without RUN, the latest run of PLAN that did not succeed, when you started
it on this host: a run that the state says someone else or another host
started (or that says nobody) must be named, since a state from elsewhere
would have apply run with its recorded vars. The recorded vars are printed
before anything runs. Give RUN as --resume=RUN or --resume RUN.

A plan whose platform.binary names a program other than brev (a tools/brev
shipped with it) has apply ask before running it, on a terminal, naming the
program; with --yes, or without a terminal, apply refuses (exit 2) unless
--brev-binary names the program to run: a plan chooses no program for you.

Exit status: 0 all succeeded; 1 a node failed (teardown done); 2 invalid plan
or usage (nothing started); 3 teardown incomplete (something may still exist:
the names and the command that removes them are printed); 130 interrupted
(teardown done).

--detach (-d) checks the plan and asks what apply asks here, then runs the
plan in a background process that no terminal owns, prints the run id and
how to follow it ('taoflow attach RUN', 'logs -f', 'status', 'cancel') and
exits 0; what that process prints goes to .taoflow/runs/RUN/apply.log. The
run's exit code is in 'taoflow status RUN' when it ends. Closing the
terminal of an apply without --detach (SIGHUP) cancels and tears down, as
Ctrl-C does, unless --detach-on-hangup (or TAOFLOW_DETACH_ON_HANGUP=1) is
given: the run then goes on, its output to apply.log. An apply started
with SIGHUP ignored (nohup) keeps ignoring it.`,
		Example: `  taoflow apply examples/plans/quickstart.yaml
  NGC_KEY=... taoflow apply train.yaml --var epochs=20 --parallel 4
  taoflow apply train.yaml --resume             # the latest run, after a crash
  taoflow apply sweep.yaml --output json > events.jsonl
  taoflow apply sweep.yaml -d --yes             # in the background; then: taoflow attach RUN`,
		Args: func(cmd *cobra.Command, args []string) error {
			// --resume takes its value only with "=": `--resume RUN` gives RUN
			// as a second argument.
			if len(args) == 2 && f.resume == "latest" {
				return nil
			}
			if len(args) != 1 {
				return usageError(fmt.Errorf("apply takes one plan file (and, after --resume, a run), got %d arguments", len(args)))
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 && f.resume != "" {
				return runCompletion(g, false)(cmd, nil, toComplete) // apply PLAN --resume RUN
			}
			return planFileCompletion(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				// apply PLAN --resume RUN, or apply --resume RUN PLAN.
				if !isFile(args[0]) && isFile(args[1]) {
					args[0], args[1] = args[1], args[0]
				}
				f.resume = args[1]
			}
			return apply(cmd.Context(), sio, g, args[0], f)
		},
	}
	f.vars.register(cmd)
	cmd.Flags().IntVar(&f.parallel, "parallel", 0, "most nodes running at once (0: no limit beyond slots)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "auto", "output: `auto`, plain or json")
	cmd.Flags().Bool("json", false, "print one JSON event per line (--output json)")
	cmd.Flags().DurationVar(&f.finally, "finally-timeout", 30*time.Minute, "deadline for finalizers, salvage uploads (design.md §8.6) and instance teardown")
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "create billed (brev) instances without asking (not: run a brev program the plan names, see --brev-binary)")
	cmd.Flags().StringVar(&f.brev, "brev-binary", "", "the brev `PROGRAM` to run (default: brev on PATH); over the plan's platform.binary, which apply otherwise asks about")
	cmd.Flags().StringVar(&f.resume, "resume", "", "continue `RUN` (default: the latest unfinished run of PLAN) instead of starting a new one")
	cmd.Flags().Lookup("resume").NoOptDefVal = "latest"
	cmd.Flags().StringVar(&f.name, "name", "", "a readable `NAME` for the run, unique in the state (status and logs accept it for the run id)")
	cmd.Flags().StringArrayVar(&f.tags, "tag", nil, "tag the run: `KEY=VALUE` (repeatable; over the plan's tags:)")
	cmd.Flags().StringVar(&f.report, "report", "", "at the end, write the run's page as one self-contained HTML `FILE` (taoflow report)")
	cmd.Flags().BoolVar(&f.clean, "require-clean", false, "refuse to run a plan whose git repository has uncommitted changes")
	cmd.Flags().BoolVarP(&f.detach, "detach", "d", false, "run in the background, owned by no terminal; print the run id and how to follow it (taoflow attach RUN), then exit 0")
	cmd.Flags().BoolVar(&f.detachOnHangup, "detach-on-hangup", false, "when the terminal closes (SIGHUP), go on running, output to the run's apply.log, instead of tearing down (env TAOFLOW_DETACH_ON_HANGUP=1)")
	cmd.Flags().StringVar(&f.detachedRun, detachedFlag, "", "the background process of apply --detach, running `RUN`")
	_ = cmd.Flags().MarkHidden(detachedFlag)
	_ = cmd.RegisterFlagCompletionFunc("resume", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return runCompletion(g, false)(cmd, nil, toComplete)
	})
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"auto", "plain", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func apply(parent context.Context, sio stdio, g *globals, path string, f *applyFlags) error {
	switch f.output {
	case "auto", "plain", "json":
	default:
		return usageError(fmt.Errorf("--output %q: use auto, plain or json", f.output))
	}
	if f.parallel < 0 {
		return usageError(fmt.Errorf("--parallel must not be negative"))
	}
	if err := checkRunName(f.name); err != nil {
		return err
	}
	tags, err := parseTags(f.tags)
	if err != nil {
		return err
	}
	if f.detachedRun != "" {
		// The background process of apply --detach: the user agreed in
		// the foreground, and no terminal is here to ask on.
		f.yes, f.detach = true, false
	}
	var prior *runner.Resumed
	if f.resume != "" {
		if f.name != "" || len(tags) > 0 || f.clean {
			return usageError(fmt.Errorf("--name, --tag and --require-clean can't be given with --resume: a resumed run keeps the name, tags and provenance it started with"))
		}
		opts, fileDiags, err := f.vars.options()
		if err != nil {
			return usageError(err)
		}
		if fileDiags.HasErrors() {
			for _, d := range fileDiags {
				fmt.Fprintln(sio.err, d)
			}
			return silent(exitUsage)
		}
		given := opts.Vars
		if prior, err = runner.LoadResumed(parent, g.stateDir, f.resume, path); err != nil {
			return err
		}
		if err := prior.CheckVars(given); err != nil {
			return err
		}
		// The recorded vars steer the run (an upload's bucket, say): shown
		// before anything runs, with who started it.
		who := ""
		if prior.StartedBy != "" {
			who = ", started by " + prior.StartedBy
		}
		vars := "none"
		if flags := prior.VarFlags(); len(flags) > 0 {
			vars = strings.Join(flags, " ")
		}
		fmt.Fprintf(escapeWriter{sio.err}, "taoflow: run %s%s: its recorded vars: %s\n", prior.Run.ID, who, vars)
		f.vars = varFlags{vars: prior.VarFlags(), strict: f.vars.strict, cmd: f.vars.cmd}
	}
	p, _, err := loadPlan(sio, path, f.vars)
	if err != nil {
		return err
	}
	secrets, err := secret.Resolve(p.SecretNames(), os.LookupEnv)
	if err != nil {
		return usageError(err)
	}
	if short := secrets.TooShort(); len(short) > 0 {
		// Refused, not warned about: such a value cannot be redacted, so
		// promise (2) could not be kept. Nothing has started yet.
		return usageError(fmt.Errorf("secret %s is shorter than %d characters: taoflow redacts secrets from every output, log and state, and a value that short cannot be told from ordinary text, so it would be shown as it is; set the real secret (or, if the value is not secret, make it a var)", strings.Join(short, ", "), secret.MinRedactLen))
	}
	// The types of the instances it creates, from brev search: a filter
	// that nothing passes, or a budget the plan cannot keep, is exit 2
	// before anything is asked or created.
	// A brev program the plan names runs only once the user agreed: before
	// the search that would run it.
	if err := confirmProgram(sio, p, f); err != nil {
		return err
	}
	sel, err := runner.Select(parent, p, runner.SelectOptions{PlanBinary: true})
	if err != nil {
		return err
	}
	// The plan is expanded once, for the run: the budget is checked on
	// the graph that runs.
	graph, err := runner.ExpandAs(p, prior, f.detachedRun)
	if err != nil {
		return err
	}
	if err := runner.CheckBudget(p, pricing.Estimated(graph, sel)); err != nil {
		return err
	}
	if prior == nil && !f.yes {
		// A resumed run was agreed to when it started.
		if err := confirmBilling(sio, p.Billed(), sel); err != nil {
			return err
		}
	}
	if f.detach {
		return startDetached(sio, g, path, f, p, prior, graph.RunID)
	}
	red := secrets.Redactor()
	out := secret.NewWriter(sio.out, red)
	defer out.Close()
	errOut := secret.NewWriter(sio.err, red)
	defer errOut.Close()

	a, err := runner.Start(parent, runner.ApplyConfig{Plan: p, Graph: graph, PlanPath: path, Secrets: secrets, StateDir: g.stateDir,
		Resume: prior, Selection: sel, Parallel: f.parallel, FinallyTimeout: f.finally,
		RunName: f.name, Tags: tags, RequireClean: f.clean, Version: versionString(), TransientBackoff: g.transientBackoff,
		StopTimeout: g.stopTimeout,
		OnBudget: func(why string) {
			fmt.Fprintf(errOut, "\ntaoflow: over budget: %s; cancelling the running work, then tearing down (finalizers run)\n", why)
		}})
	if err != nil {
		return err
	}
	defer a.Close()
	rememberState(errOut, g.stateDir)
	view := redactedView{newView(f.output, out, errOut, sio.out, a.ID, a.Graph, func() (pricing.RunCost, error) { return a.Costs(parent) }), red}
	view.Start(applyStart{RunID: a.ID, Plan: path, Resumed: prior != nil, DoneBefore: len(a.Done), Nodes: len(a.Graph.Nodes),
		Instances: len(p.Instances), StateDir: g.stateDir})

	hup := newHangup(f, g.stateDir, a.ID)
	onHangup := hup.withHangup(view.applyView, out)
	runCtx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	stopSignals := handleSignals(errOut, a, cancel, hup, onHangup)
	defer stopSignals()

	o, err := a.Run(runCtx, view)
	view.Close()
	if err != nil {
		return err
	}
	if o.RecordErr != nil {
		fmt.Fprintf(errOut, "taoflow: could not record the end of the run: %v\n", o.RecordErr)
	}
	view.Outcome(o)
	reportNotify(errOut, a.Notify(parent, o))
	if f.report != "" {
		reportAfterApply(parent, errOut, g.stateDir, a.ID, f.report)
	}
	if o.ExitCode == exitOK {
		return nil
	}
	return silent(o.ExitCode)
}

// isTerminal reports whether r is a terminal to ask on (a variable so tests
// can answer the question).
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirmProgram settles which brev CLI apply runs. --brev-binary names
// it (and becomes the plan's platform.binary for this run, recorded so);
// else a program the plan names (runner.PlanBinary) is run only when the
// user, asked on a terminal with the program's full path shown, agrees:
// with --yes or without a terminal apply refuses, saying how to name it.
func confirmProgram(sio stdio, p *plan.Plan, f *applyFlags) error {
	if f.brev != "" {
		p.Platform.Binary = absProgram(f.brev)
		return nil
	}
	prog := runner.PlanBinary(p)
	if prog == "" {
		return nil
	}
	bin, path := escapeControls(p.Platform.Binary), escapeControls(prog)
	if f.yes || !isTerminal(sio.in) {
		why := "--yes does not cover it"
		if !f.yes {
			why = "stdin is not a terminal to ask on"
		}
		return usageError(fmt.Errorf("the plan names its own brev CLI (platform.binary: %s), the program %s; taoflow runs a program a plan chooses only when you agree, and %s: if it is yours, name it: --brev-binary %s (or --brev-binary brev for brev on PATH)", bin, path, why, path))
	}
	fmt.Fprintf(sio.err, "The plan names its own brev CLI (platform.binary: %s). Run the program %s, with your brev login and environment? [y/N] ", bin, path)
	answer := readAnswer(sio.in)
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return usageError(fmt.Errorf("nothing run: the plan's platform.binary %s was not allowed", path))
	}
	return nil
}

// readAnswer reads one line from r, a byte at a time: a buffered reader
// would take the answer to a second question with the first.
func readAnswer(r io.Reader) string {
	var b strings.Builder
	one := make([]byte, 1)
	for b.Len() < 1024 {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				break
			}
			b.WriteByte(one[0])
		}
		if err != nil {
			break
		}
	}
	return b.String()
}

// confirmBilling asks on a terminal before apply creates instances that
// bill from creation, and refuses without one: --yes answers for the user,
// as terraform apply needs -auto-approve in automation.
func confirmBilling(sio stdio, billed []*plan.Instance, sel *pricing.Selection) error {
	if len(billed) == 0 {
		return nil
	}
	var groups []string
	byType := map[string][]string{}
	perHour, priced := 0.0, true
	for _, in := range billed {
		chain := in.CreateType
		if c := sel.For(in.Name); c != nil && len(c.Chain) > 0 {
			chain = strings.Join(c.Chain, ",")
			if c.Priced() {
				o, _ := c.Offer(c.Chain[0])
				perHour += o.PricePerHour
			}
		}
		priced = priced && sel.For(in.Name).Priced()
		if _, ok := byType[chain]; !ok {
			groups = append(groups, chain)
		}
		byType[chain] = append(byType[chain], in.Name)
	}
	var parts []string
	for _, t := range groups {
		parts = append(parts, strings.Join(byType[t], ", ")+": "+t)
	}
	if priced {
		parts = append(parts, "~"+platform.Dollars(perHour)+"/h at list prices")
	}
	what := fmt.Sprintf("%d Brev instance%s (%s)", len(billed), plural(len(billed)), strings.Join(parts, "; "))
	if !isTerminal(sio.in) {
		return usageError(fmt.Errorf("refusing to create %s without --yes: they bill from creation, and stdin is not a terminal to ask on; run again with --yes (-y)", what))
	}
	fmt.Fprintf(sio.err, "Create %s? They bill until taoflow deletes them. [y/N] ", what)
	answer := readAnswer(sio.in)
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return usageError(fmt.Errorf("nothing created"))
	}
	return nil
}

// newView picks apply's view: out and errOut are the (redacting) writers
// to print to, raw the underlying stdout, checked for a terminal.
func newView(output string, out, errOut io.Writer, raw io.Writer, runID string, g *engine.Graph, costs func() (pricing.RunCost, error)) applyView {
	switch output {
	case "json":
		return newJSONView(out, runID)
	case "auto":
		if f, ok := raw.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
			lv := newLiveView(out, g, func() (int, int) {
				c, r, err := term.GetSize(int(f.Fd()))
				if err != nil {
					return 80, 24
				}
				return c, r
			})
			lv.showCosts(costs)
			return &humanView{Observer: lv, out: out, errOut: errOut}
		}
	}
	return &humanView{Observer: &plainView{w: out}, out: out, errOut: errOut}
}

// handleSignals implements the three-stage Ctrl-C: cancel and tear down;
// say what teardown is doing; abandon it with exit 3.
// SIGHUP (a closed terminal or ssh session) tears down like SIGTERM,
// unless hup says otherwise (detach.go).
func handleSignals(w io.Writer, a *runner.Apply, cancel context.CancelCauseFunc, hup *hangup, onHangup func()) func() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, hup.signals()...)
	var once sync.Once
	done := make(chan struct{})
	// The handler's goroutine: stop waits for it, so a signal being
	// answered is answered before apply returns (a panic in it is
	// re-raised there, with its stack).
	var handler conc.WaitGroup
	handler.Go(func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if hup.continues(sig, onHangup) {
					continue
				}
				n++
				name := "SIGTERM"
				switch sig {
				case os.Interrupt:
					name = "SIGINT (Ctrl-C)"
				case syscall.SIGHUP:
					name = "SIGHUP (terminal closed)"
				}
				switch n {
				case 1:
					fmt.Fprintf(w, "\ntaoflow: %s: starting no more nodes, cancelling running ones, salvaging the results jobs wrote, then tearing down (Ctrl-C again skips the salvage and shows what teardown does)\n", name)
					cancel(fmt.Errorf("interrupted by %s", name))
				case 2:
					// The uploads and fetches salvaging results (docs/design.md
					// §8.6) stop, and no more start.
					a.SkipSalvage()
					// Bounded: a signal handler must never wait on a busy state store.
					ctx, cancelQuery := context.WithTimeout(context.Background(), 2*time.Second)
					names, err := a.Alive(ctx)
					cancelQuery()
					what := strings.Join(names, ", ")
					if err != nil {
						what = "(the state is busy; see taoflow status " + a.ID + ")"
					}
					fmt.Fprintf(w, "\ntaoflow: skipping the salvage of results; teardown is still running; not yet removed: %s\ntaoflow: Ctrl-C once more abandons teardown\n", what)
				default:
					fmt.Fprintf(w, "\ntaoflow: teardown abandoned; what it had not removed may still exist (and bill)\ntaoflow: remove it with: taoflow destroy %s --yes\n", a.ID)
					a.Abandon()
					os.Exit(exitTeardown)
				}
			}
		}
	})
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			handler.Wait()
		})
	}
}
