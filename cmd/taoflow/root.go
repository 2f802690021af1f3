package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// globals are the flags every command has.
type globals struct {
	stateDir string
}

func run(ctx context.Context, args []string, io stdio) error {
	root := newRoot(io)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) {
			// cobra's own errors: unknown command or flag, wrong arguments.
			return usageError(err)
		}
	}
	return err
}

func newRoot(io stdio) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "taoflow",
		Short: "Run YAML plans of GPU training work on remote instances",
		Long: `taoflow runs a declarative YAML plan of GPU training work — preflight, NGC
login, image pull, training jobs, waiting, S3 upload and deletion — over one or
more instances (NVIDIA Brev GPU instances, SSH hosts, or this machine), with
matrix sweeps spread over free slots, and always tears down what it created,
even on failure, Ctrl-C or a crash.

Start with:
  taoflow validate plan.yaml     check a plan, every problem with its line
  taoflow plan plan.yaml         see the nodes it expands to
  taoflow apply plan.yaml        run it

Exit codes: 0 success; 1 a node failed (teardown done); 2 usage error or
invalid plan (nothing started); 3 teardown incomplete (something may still
exist and bill — the names are printed); 130 interrupted (teardown done).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: false,
		},
	}
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.err)
	defState := os.Getenv("TAOFLOW_STATE")
	if defState == "" {
		defState = ".taoflow"
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state", defState, "state directory (env TAOFLOW_STATE)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(err)
	})
	root.AddCommand(
		newValidateCmd(io),
		newPlanCmd(io),
		newApplyCmd(io, g),
		newStatusCmd(io, g),
		newLogsCmd(io, g),
		newDestroyCmd(io, g),
		newCancelCmd(io, g),
		newReapCmd(io, g),
		newGraphCmd(io),
		newVersionCmd(io),
	)
	return root
}

// planFileCompletion completes plan file names.
func planFileCompletion(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}
