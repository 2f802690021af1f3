package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/runner"
)

type reapFlags struct {
	yes    bool
	json   bool
	binary string
	plans  []string
	only   string
}

func newReapCmd(sio stdio, g *globals) *cobra.Command {
	var f reapFlags
	cmd := &cobra.Command{
		Use:   "reap [--yes]",
		Short: "Find taoflow-made instances and containers that no state knows about, and delete them",
		Long: `Reap finds what taoflow runs made and no state accounts for — the state
directory was deleted, or a run died before it could record something — and
deletes it with --yes. It looks at:

  - Brev instances named tf-* (the names taoflow gives the instances it
    creates), through the brev CLI, when brev is installed;
  - Docker containers labelled taoflow.run=<run> on this machine, and with
    --plan PLAN on the ssh hosts and existing brev instances PLAN names.

What the state in --state records is left alone. So are the brev instances
of runs whose apply is running on this machine (announced in the user's cache
directory), and the containers of runs whose apply process is alive on this
machine (their taoflow.owner label), whatever their state directory:
'taoflow destroy RUN' removes those. Instances kept with keep: true are
recorded, so reap leaves them too. A container whose run is driven from
another machine is left to that machine.

--only brev or --only containers limits reap to one of the two.

Which tf-* brev instances are this user's? 'brev ls' cannot say: logged in
with an API key it lists the whole organisation's instances, and logged in as
a user it also lists those shared with you, all without their owner, and a
teammate's run is named tf-* as yours are. So taoflow records the name of
every brev instance it creates, before it creates it, in a file of this user
on this machine ($XDG_STATE_HOME/taoflow/brev-created, else
~/.local/state/taoflow/brev-created), and reap deletes only the tf-*
instances named there. The others are listed as not reaped, with why. What
reap cannot know: whether such an instance is yours from another machine (or
from before this record existed), or a teammate's. If it is yours, delete it
with 'brev delete NAME'.

Reap lists before it deletes: read the list, then run it again with --yes.`,
		Example: `  taoflow reap
  taoflow reap --plan ssh-box.yaml
  taoflow reap --only brev --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return reap(cmd.Context(), sio, g, f)
		},
	}
	cmd.Flags().BoolVar(&f.yes, "yes", false, "delete what is found (without it, only list)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print what was found (and done) as JSON")
	cmd.Flags().StringVar(&f.binary, "brev-binary", "", "the brev CLI (default: brev on PATH; skipped when there is none)")
	cmd.Flags().StringArrayVar(&f.plans, "plan", nil, "also look at the containers on the ssh hosts and existing brev instances of `PLAN` (repeatable)")
	cmd.Flags().StringVar(&f.only, "only", "", "look only at `WHAT`: brev (instances) or containers")
	_ = cmd.RegisterFlagCompletionFunc("only", cobra.FixedCompletions([]string{runner.ReapBrev, runner.ReapContainers}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func reap(ctx context.Context, sio stdio, g *globals, f reapFlags) error {
	switch f.only {
	case "", runner.ReapBrev, runner.ReapContainers:
	default:
		return usageError(fmt.Errorf("--only %q: use %s or %s", f.only, runner.ReapBrev, runner.ReapContainers))
	}
	r, err := runner.Reap(ctx, runner.ReapConfig{StateDir: g.stateDir, Plans: f.plans, BrevBinary: f.binary, Only: f.only, TransientBackoff: g.transientBackoff})
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Ledger != "" && !f.json {
		fmt.Fprintf(sio.err, "taoflow: brev instances are reaped when named tf-*, accounted for by no state or live run, and recorded in %s as created by this user's taoflow on this machine\n", r.Ledger)
	}
	for _, s := range r.Spared {
		fmt.Fprintf(sio.err, "taoflow: %s\n", s)
	}
	for _, o := range r.NotMine {
		fmt.Fprintf(sio.err, "taoflow: brev instance %s (%s) is not reaped: %s does not say this user's taoflow created it on this machine (a teammate's, listed by an API key or shared with you, or yours from elsewhere); if it is yours: brev delete %s\n", o.Name, o.Detail, r.Ledger, o.Name)
	}
	if !f.yes {
		return reapReport(sio, f, r.Found, r.NotMine, r.Problems)
	}
	if !f.json {
		// What is about to go, before it goes.
		for _, o := range r.Found {
			fmt.Fprintf(sio.err, "taoflow: deleting %s %s (%s)\n", o.Kind, o.Name, o.Detail)
		}
	}
	left := r.Remove(ctx)
	if err := reapReport(sio, f, r.Found, r.NotMine, r.Problems); err != nil {
		return err
	}
	if left > 0 {
		fmt.Fprintf(sio.err, "taoflow: %d could not be removed; they may still exist (and bill)\n", left)
		return silent(exitTeardown)
	}
	return nil
}

// reapReport prints what reap found (and, with --yes, did), as lines or
// as one JSON object.
func reapReport(sio stdio, f reapFlags, found, notMine []runner.Orphan, problems []error) error {
	if f.json {
		var probs []string
		for _, p := range problems {
			probs = append(probs, p.Error())
		}
		enc := json.NewEncoder(sio.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Found    []runner.Orphan `json:"found"`
			NotMine  []runner.Orphan `json:"not_reaped,omitempty"`
			Problems []string        `json:"problems,omitempty"`
		}{append([]runner.Orphan{}, found...), notMine, probs}); err != nil {
			return err
		}
		if len(problems) > 0 {
			return silent(exitFailed)
		}
		return nil
	}
	if len(found) == 0 {
		fmt.Fprintln(sio.out, "nothing to reap")
		return joinProblems(sio, problems)
	}
	for _, o := range found {
		switch {
		case o.Removed == nil:
			fmt.Fprintf(sio.out, "%-14s %-50s %s\n", o.Kind, o.Name, o.Detail)
		case *o.Removed:
			fmt.Fprintf(sio.out, "%s %s: removed\n", o.Kind, o.Name)
		default:
			fmt.Fprintf(sio.out, "%s %s: NOT removed: %s\n", o.Kind, o.Name, o.Error)
		}
	}
	if !f.yes {
		fmt.Fprintf(sio.out, "%d found; run 'taoflow reap --yes' to delete them\n", len(found))
	}
	return joinProblems(sio, problems)
}

func joinProblems(sio stdio, problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(sio.err, "taoflow: %v\n", p)
	}
	return silent(exitFailed)
}
