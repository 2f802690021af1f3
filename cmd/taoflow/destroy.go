package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// confirmFlags are the programs and configs a user confirms for destroy
// and cancel (runner.Confirmed): the state alone never names what they run.
func confirmFlags(cmd *cobra.Command, c *runner.Confirmed) {
	cmd.Flags().StringVar(&c.BrevBinary, "brev-binary", "", "the brev program to run (default: brev on PATH); needed when the run's plan named another one")
	cmd.Flags().StringVar(&c.SSHConfig, "ssh-config", "", "the ssh client config to use; needed when the run's plan named one")
}

func newDestroyCmd(sio stdio, g *globals) *cobra.Command {
	var yes, all bool
	var confirmed runner.Confirmed
	cmd := &cobra.Command{
		Use:   "destroy RUN|--all",
		Short: "Tear down every resource the state says may still exist",
		Long: `Destroy reads the state and removes what a run recorded and may have left:
it stops the run's jobs on each instance, then deletes the instances the run
created. It is what finishes a teardown that was abandoned, or that never
happened because apply was killed (kill -9, power loss). Instances the plan
only used (existing:, ssh hosts) are never deleted; only the run's jobs on
them are stopped.

It refuses while the run's apply is still alive (use 'taoflow cancel'), and
asks before deleting unless --yes. Exit status 3 if something could not be
removed (it is named).

It never runs a program or uses an ssh config that only the state names: a
brev other than the one on PATH, or the plan's ssh_config, must be named
again with --brev-binary or --ssh-config (exit 2 says which).`,
		Example: `  taoflow destroy quickstart-1203-041523-a1b2 --yes
  taoflow destroy --all --yes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all != (len(args) == 0) || len(args) > 1 {
				return usageError(fmt.Errorf("give one RUN or --all"))
			}
			return nil
		},
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var one state.Run
			if !all {
				// An unknown run is found without creating a state.
				var err error
				if one, err = findRun(ctx, g.stateDir, args[0]); err != nil {
					return err
				}
			} else if store, err := openState(g.stateDir); err != nil || store == nil {
				if err != nil {
					return err
				}
				fmt.Fprintln(sio.out, "nothing to destroy: there is no state in "+g.stateDir)
				return nil
			} else {
				store.Close()
			}
			store, err := state.Open(g.stateDir)
			if err != nil {
				return err
			}
			defer store.Close()
			runs := []state.Run{one}
			if all {
				if runs, err = store.Runs(ctx); err != nil {
					return err
				}
			}
			return destroyRuns(ctx, sio, g, store, runs, yes, confirmed)
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "don't ask for confirmation")
	cmd.Flags().BoolVar(&all, "all", false, "every run in the state")
	confirmFlags(cmd, &confirmed)
	return cmd
}

func destroyRuns(ctx context.Context, sio stdio, g *globals, store *state.Store, runs []state.Run, yes bool, confirmed runner.Confirmed) error {
	d := runner.Destroyer{Store: store, StateDir: g.stateDir, Log: escapeWriter{sio.out}, CanceledExitCode: exitInterrupted, Confirmed: confirmed,
		TransientBackoff: g.transientBackoff, StopTimeout: g.stopTimeout}
	type work struct {
		run   state.Run
		alive []state.Resource
	}
	var todo []work
	for _, r := range runs {
		alive, err := store.Alive(ctx, r.ID)
		if err != nil {
			return err
		}
		if len(alive) == 0 {
			continue
		}
		if runner.ApplyAlive(r) {
			return usageError(fmt.Errorf("run %s is still being applied (pid %d); stop it with: taoflow cancel %s", r.ID, r.PID, r.ID))
		}
		if err := d.Check(r.ID, alive); err != nil {
			return err
		}
		todo = append(todo, work{r, alive})
	}
	if len(todo) == 0 {
		fmt.Fprintln(sio.out, "nothing to destroy: the state records no resource that may still exist")
		return nil
	}
	for _, w := range todo {
		for _, res := range w.alive {
			fmt.Fprintf(sio.out, "%s: %s %s on %s (%s)\n", w.run.ID, res.Kind, escapeControls(res.Name), escapeControls(res.Instance), res.State)
		}
	}
	if !yes {
		f, isFile := sio.in.(*os.File)
		if !isFile || !term.IsTerminal(int(f.Fd())) {
			return usageError(fmt.Errorf("refusing to destroy without --yes (stdin is not a terminal to ask on)"))
		}
		fmt.Fprint(sio.out, "destroy these? [y/N] ")
		answer, _ := bufio.NewReader(sio.in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return usageError(fmt.Errorf("nothing destroyed"))
		}
	}
	var left []error
	var again []work // the runs to destroy again
	for _, w := range todo {
		if err := d.Destroy(ctx, w.run, w.alive); err != nil {
			left = append(left, joined(err)...) // one list for all runs
			again = append(again, w)
		}
	}
	if len(left) == 0 {
		return nil
	}
	w := escapeWriter{sio.err}
	fmt.Fprintf(w, "taoflow: %d resources could not be removed; they may still exist (and bill):\n", len(left))
	for _, err := range left {
		fmt.Fprintf(w, "taoflow:   %v\n", err)
	}
	for _, a := range again {
		// With the flags that confirm the run's brev program and ssh
		// config, as status's advice has them.
		fmt.Fprintf(w, "taoflow: remove what is left of run %s with: %s\n", a.run.ID, runner.DestroyCommand(a.run.ID, a.alive))
	}
	return silent(exitTeardown)
}

func newCancelCmd(sio stdio, g *globals) *cobra.Command {
	var wait time.Duration
	var confirmed runner.Confirmed
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Stop a run, whether or not its apply process is alive",
		Long: `Cancel stops RUN. If its apply process is alive on this host, it gets the
same interrupt as a Ctrl-C (cancel running nodes, run finalizers, tear
down), and cancel waits for it to finish. If the process is gone, cancel
tears down what the state records, like 'taoflow destroy RUN --yes'.`,
		Args:              argsRange(1, 1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			r, err := findRun(ctx, g.stateDir, args[0])
			if err != nil {
				return err
			}
			store, err := state.Open(g.stateDir)
			if err != nil {
				return err
			}
			defer store.Close()
			if interrupted, err := cancelRun(ctx, sio, g, store, r, confirmed); err != nil || !interrupted {
				return err
			}
			fmt.Fprintf(sio.out, "interrupted apply (pid %d); waiting for its teardown\n", r.PID)
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) {
				if !runner.OwnerAlive(r) {
					r, _ = store.Run(ctx, r.ID)
					fmt.Fprintf(sio.out, "run %s: %s\n", r.ID, r.State)
					return nil
				}
				time.Sleep(200 * time.Millisecond)
			}
			return fmt.Errorf("apply (pid %d) is still tearing down after %s", r.PID, wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for the run's teardown")
	confirmFlags(cmd, &confirmed)
	return cmd
}

// cancelRun stops run r (cancel, and the web UI's cancel): the same
// interrupt as a Ctrl-C to its apply when that is alive on this host, else
// a teardown of what the state records, as destroy --yes. interrupted
// says it signalled the apply, whose teardown then goes on.
func cancelRun(ctx context.Context, sio stdio, g *globals, store *state.Store, r state.Run, confirmed runner.Confirmed) (interrupted bool, err error) {
	if !runner.ApplyAlive(r) {
		return false, destroyRuns(ctx, sio, g, store, []state.Run{r}, true, confirmed)
	}
	// The apply is the process the run recorded (its start time and
	// command line, not only its pid), and only it is signalled.
	if err := runner.InterruptApply(r); err != nil {
		if errors.Is(err, runner.ErrNotOwner) {
			return false, destroyRuns(ctx, sio, g, store, []state.Run{r}, true, confirmed)
		}
		return false, fmt.Errorf("signalling apply (pid %d): %w", r.PID, err)
	}
	return true, nil
}
