package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/schema"
	"github.com/taoflow/taoflow/state"
)

// globals are the flags every command has.
type globals struct {
	// stateDir is the state directory the command reads (resolveState).
	stateDir string
	// stateFound: stateDir was found in a parent of the working
	// directory (it is absolute then).
	stateFound bool
	// transientBackoff is the pause before a command whose connection
	// failed before it ran is tried again (env TAOFLOW_RETRY_BACKOFF;
	// 0: steps.DefaultTransientBackoff).
	transientBackoff time.Duration
	// stopTimeout bounds the stop of a run's jobs on an instance at its
	// release (env TAOFLOW_STOP_TIMEOUT; 0: steps.DefaultStopTimeout).
	stopTimeout time.Duration
}

// fromEnv reads the settings that come from the environment alone.
func (g *globals) fromEnv() error {
	for _, e := range []struct {
		name, example string
		to            *time.Duration
	}{
		{"TAOFLOW_RETRY_BACKOFF", "1s", &g.transientBackoff},
		{"TAOFLOW_STOP_TIMEOUT", "2m", &g.stopTimeout},
	} {
		v := os.Getenv(e.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return usageError(fmt.Errorf("%s=%q: want a positive duration such as %s", e.name, v, e.example))
		}
		*e.to = d
	}
	return nil
}

// run runs the command line args. An error from before a command's RunE
// started (an unknown command or flag, wrong arguments) is the user's:
// exit 2. Errors from RunE keep their type; exitCode maps them.
func run(ctx context.Context, args []string, io stdio) error {
	root := newRoot(io)
	started := false
	markStarted(root, &started)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && !started {
		var ee *exitError
		if !errors.As(err, &ee) {
			return usageError(err)
		}
	}
	return err
}

// markStarted wraps the RunE of cmd and its subcommands so that *started
// says whether one began.
func markStarted(cmd *cobra.Command, started *bool) {
	if runE := cmd.RunE; runE != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			*started = true
			return runE(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markStarted(sub, started)
	}
}

func newRoot(io stdio) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "taoflow",
		Short:         "Run YAML plans of GPU training work on remote instances",
		Long:          rootLong(),
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: false,
		},
	}
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.err)
	root.PersistentFlags().StringVar(&g.stateDir, "state", "", "state `DIR` (default: env TAOFLOW_STATE, else the nearest .taoflow in the working directory or a parent, else ./.taoflow)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(err)
	})
	root.AddCommand(
		newValidateCmd(io),
		newPlanCmd(io, g),
		newApplyCmd(io, g),
		newAttachCmd(io, g),
		newStatusCmd(io, g),
		newResultsCmd(io, g),
		newLogsCmd(io, g),
		newDestroyCmd(io, g),
		newCancelCmd(io, g),
		newReapCmd(io, g),
		newUICmd(io, g),
		newReportCmd(io, g),
		newGraphCmd(io),
		newSchemaCmd(io),
		newInitCmd(io),
		newVersionCmd(io),
	)
	addOutputFlags(root)
	resolve := root.PersistentPreRunE
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := g.fromEnv(); err != nil {
			return err
		}
		g.resolveState(c.Flags())
		if g.stateFound && stateCommands[c.Name()] {
			fmt.Fprintf(escapeWriter{io.err}, "taoflow: using the state in %s (found above the working directory)\n", g.stateDir)
		}
		return resolve(c, args)
	}
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// stateCommands are the commands that read or write the state: they say
// which state they use when it was found in a parent directory.
var stateCommands = map[string]bool{"apply": true, "attach": true, "status": true, "results": true, "logs": true,
	"destroy": true, "cancel": true, "reap": true, "ui": true, "report": true}

// resolveState sets g.stateDir (docs/design.md §7.6): --state
// when given; else $TAOFLOW_STATE; else the nearest .taoflow in the
// working directory or a parent of it that is this user's
// (state.Find); else .taoflow, which apply creates in the working
// directory.
func (g *globals) resolveState(flags *pflag.FlagSet) {
	g.stateFound = false
	if f := flags.Lookup("state"); f != nil && f.Changed && g.stateDir != "" {
		return
	}
	if env := os.Getenv("TAOFLOW_STATE"); env != "" {
		g.stateDir = env
		return
	}
	g.stateDir = state.DirName
	cwd, err := os.Getwd()
	if err != nil {
		return
	}
	if dir, ok := state.Find(cwd, state.Mine); ok && filepath.Dir(dir) != cwd {
		g.stateDir, g.stateFound = dir, true
	}
}

// rootLong is the root command's help. Its list of step kinds, and each
// one's summary, come from the schema, so a new kind is listed here by
// adding it there.
func rootLong() string {
	kinds := schema.StepKinds()
	width := 0
	for _, k := range kinds {
		width = max(width, len(k))
	}
	var steps strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&steps, "  %-*s  %s\n", width, k, schema.StepSummary(k))
	}
	return `taoflow runs a declarative YAML plan of GPU training work over one or more
instances (NVIDIA Brev GPU instances, SSH hosts, or this machine), with
matrix sweeps spread over free slots, and always tears down what it created,
even on failure, Ctrl-C or a crash.

Start with:
  taoflow init plan.yaml         write a commented starter plan (runs as is)
  taoflow validate plan.yaml     check a plan, every problem with its line
  taoflow plan plan.yaml         see what it creates, runs and deletes
  taoflow apply plan.yaml        run it
  taoflow schema                 every key a plan may hold (JSON Schema)

The steps a plan can use (uses:), from the schema:
` + steps.String() + `
Relative paths in a plan (send, fetch, notify, platform.ssh_config) are from
the plan's directory; paths on the command line (--state, --var-file,
--download) are from the working directory. A file:// URL takes an absolute
path (file://${{ plan.dir }}/out is beside the plan).

Exit codes: 0 success; 1 a node failed (teardown done), or the command
could not do its work (e.g. the state could not be read); 2 usage error,
unknown run or invalid plan (nothing started); 3 teardown incomplete
(something may still exist and bill — the names are printed); 130
interrupted (teardown done).

Commands that print data take --json (-o json is the same); apply takes
--output json (or --json, -o json). Their schemas: docs/json.md.

The state (runs, their resources and logs) is read from --state DIR, else
$TAOFLOW_STATE, else the nearest .taoflow directory in the working directory
or one of its parents (as git finds .git; the search stops at a parent that
is not yours), else ./.taoflow, which apply creates. A command says which
state it uses when it found one in a parent. apply records each state it
uses in $XDG_STATE_HOME/taoflow/states, so that 'status --all' lists every
state's runs and reap knows which leftovers belong to a run elsewhere.

Environment: TAOFLOW_STATE is --state's default; TAOFLOW_RETRY_BACKOFF (a
duration, default 1s) is the pause before a remote command whose connection
failed before it ran is tried again, doubled before each later try;
TAOFLOW_STOP_TIMEOUT (a duration, default 2m) bounds the stop of a run's
jobs on an instance when it is released (apply's teardown, destroy): an
instance that is deleted next is deleted even when its jobs could not be
stopped in that time (a hung instance).`
}

// planFileCompletion completes plan file names.
func planFileCompletion(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// runCompletion completes run ids from the state (newest first) for the
// first argument, and, with nodes, the node ids of that run for the second.
func runCompletion(g *globals, nodes bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 1 || (len(args) == 1 && !nodes) {
			return nil, none
		}
		g.resolveState(cmd.Flags())
		store, err := state.OpenReadOnly(g.stateDir)
		if err != nil {
			return nil, none
		}
		defer store.Close()
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		var out []string
		if len(args) == 1 {
			r, err := runner.FindRun(ctx, store, args[0])
			if err != nil {
				return nil, none
			}
			ns, _ := store.Nodes(ctx, r.ID)
			for _, n := range ns {
				out = append(out, n.ID+"\t"+n.State)
			}
			return out, none
		}
		runs, _ := store.Runs(ctx)
		for i := len(runs) - 1; i >= 0; i-- {
			out = append(out, runs[i].ID+"\t"+runs[i].State)
		}
		return out, none
	}
}
