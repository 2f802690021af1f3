package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

type reapFlags struct {
	yes        bool
	json       bool
	binary     string
	plans      []string
	only       string
	names      []string
	unrecorded bool
}

func newReapCmd(sio stdio, g *globals) *cobra.Command {
	var f reapFlags
	cmd := &cobra.Command{
		Use:   "reap [--yes] [--name NAME...|--unrecorded]",
		Short: "Find taoflow-made instances, containers and Slurm jobs that no state knows about, and delete them",
		Long: `Reap finds what taoflow runs made and no state accounts for — the state
directory was deleted, or a run died before it could record something — and
deletes it with --yes. It looks at:

  - Brev instances named tf-* (the names taoflow gives the instances it
    creates), through the brev CLI, when brev is installed;
  - Docker containers labelled taoflow.run=<run> on this machine, and with
    --plan PLAN on the ssh hosts and existing brev instances PLAN names.
  - Slurm jobs of this user named tf-* whose comment names a taoflow run
    (squeue --me), when this machine is a Slurm client (squeue on PATH and
    SLURM_CONF or /etc/slurm/slurm.conf); --yes scancels them.

What the state in --state records is left alone, and so is what the runs of
the other states in this user's index of states ($XDG_STATE_HOME/taoflow/states,
written by apply) record: reap says which run it belongs to and where
("belongs to run X in DIR: resume or destroy it there"). So are the brev instances
of runs whose apply is running on this machine (announced in the user's cache
directory), and the containers of runs whose apply process is alive on this
machine (their taoflow.owner label), whatever their state directory:
'taoflow destroy RUN' removes those. Instances kept with keep: true are
recorded, so reap leaves them too. A container whose run is driven from
another machine is left to that machine.

--only brev or --only containers limits reap to one of them (Slurm jobs are
looked at only without --only).

Which tf-* brev instances are this user's? 'brev ls' cannot say: logged in
with an API key it lists the whole organisation's instances, and logged in as
a user it also lists those shared with you, all without their owner, and a
teammate's run is named tf-* as yours are. So taoflow records the name of
every brev instance it creates, before it creates it, in a file of this user
on this machine ($XDG_STATE_HOME/taoflow/brev-created, else
~/.local/state/taoflow/brev-created), and reap deletes on its own only the
tf-* instances named there. What reap cannot know: whether another tf-*
instance is yours from another machine (a CI runner whose HOME is gone) or
a teammate's. Logged in as a user (not with an API key), brev lists only your
instances and those shared with you, so such an instance is most likely
yours, and reap says so.

--name NAME (repeatable) reaps the tf-* brev instances named, whether
recorded or not, and nothing else: each must be listed by brev and belong to
no run in the state or running here (exit 2 otherwise, before anything is
deleted). --unrecorded reaps every tf-* instance no state, live run or
record accounts for, and is refused unless brev is logged in as a user.
Both delete as apply does: brev delete, tried again on failure, then a wait
until brev lists the instance DELETING or no more.

Reap lists before it deletes: read the list, then run it again with --yes.
The listing ends with what reap does not reap, each with why and, where it
should go, the command that removes it; and with the places it could not
search.

Exit status: 0 when everything was searched and nothing is left that reap
cannot account for; 1 when some place could not be searched (brev logged
out, its listing failed, no brev CLI where this user's taoflow made brev
instances, a host unreachable) — there may be leftovers reap did not see;
3 when something could not be removed, or when tf-* brev instances that no
state, live run or record accounts for still exist (they may bill: delete
yours with --name); 2 for a request refused as given.`,
		Example: `  taoflow reap
  taoflow reap --plan ssh-box.yaml
  taoflow reap --only brev --yes
  taoflow reap --name tf-sweep-0101-120000-ab12-gpu --yes`,
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
	cmd.Flags().StringArrayVar(&f.names, "name", nil, "reap only the tf-* brev instance `NAME`, recorded here or not (repeatable)")
	cmd.Flags().BoolVar(&f.unrecorded, "unrecorded", false, "also reap the tf-* brev instances this machine has no record of (only when brev is logged in as a user)")
	_ = cmd.RegisterFlagCompletionFunc("only", cobra.FixedCompletions([]string{runner.ReapBrev, runner.ReapContainers}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func reap(ctx context.Context, sio stdio, g *globals, f reapFlags) error {
	switch f.only {
	case "", runner.ReapBrev, runner.ReapContainers:
	default:
		return usageError(fmt.Errorf("--only %q: use %s or %s", f.only, runner.ReapBrev, runner.ReapContainers))
	}
	switch {
	case (len(f.names) > 0 || f.unrecorded) && f.only == runner.ReapContainers:
		return usageError(fmt.Errorf("--name and --unrecorded are for brev instances; they don't go with --only %s", runner.ReapContainers))
	case len(f.names) > 0 && f.unrecorded:
		return usageError(fmt.Errorf("give --name or --unrecorded, not both"))
	}
	for _, n := range f.names {
		if !strings.HasPrefix(n, brev.Prefix) || !brev.ValidName(n) {
			return usageError(fmt.Errorf("--name %q: reap deletes only the instances taoflow names, %s… (delete another with brev delete)", escapeControls(n), brev.Prefix))
		}
	}
	others, indexErr := otherStates(g.stateDir)
	r, err := runner.Reap(ctx, runner.ReapConfig{StateDir: g.stateDir, OtherStates: others, Plans: f.plans, BrevBinary: f.binary, Only: f.only, TransientBackoff: g.transientBackoff,
		Names: f.names, Unrecorded: f.unrecorded})
	if err != nil {
		return err
	}
	defer r.Close()
	if indexErr != nil {
		r.Problems = append(r.Problems, fmt.Errorf("the index of states could not be read, so what runs in other state directories made may be listed as leftovers: %w", indexErr))
	}
	w := escapeWriter{sio.err}
	if r.Ledger != "" && !f.json {
		fmt.Fprintf(w, "taoflow: brev instances are reaped when named tf-*, accounted for by no state or live run, and recorded in %s as created by this user's taoflow on this machine (or named with --name)\n", r.Ledger)
	}
	left := 0
	if f.yes {
		if !f.json {
			// What is about to go, before it goes.
			for _, o := range r.Found {
				fmt.Fprintf(w, "taoflow: deleting %s %s (%s)\n", o.Kind, o.Name, o.Detail)
			}
		}
		left = r.Remove(ctx)
	}
	if err := reapReport(sio, f, r); err != nil {
		return err
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "taoflow: %v\n", p)
	}
	unaccounted := r.Unaccounted()
	switch {
	case left > 0:
		fmt.Fprintf(w, "taoflow: %d could not be removed; they may still exist (and bill)\n", left)
	case len(unaccounted) > 0:
		fmt.Fprintf(w, "taoflow: %s that no state, live run or record here accounts for still exist%s (and may bill); reap did not delete them: see 'not reaped'\n",
			count(len(unaccounted), "tf-* brev instance"), map[bool]string{true: "s", false: ""}[len(unaccounted) == 1])
	}
	switch {
	case left > 0 || len(unaccounted) > 0:
		return silent(exitTeardown)
	case len(r.Problems) > 0:
		return silent(exitFailed)
	}
	return nil
}

// reapJSON is what reap --json prints (docs/json.md).
type reapJSON struct {
	Found       []runner.Orphan `json:"found"`
	NotReaped   []runner.Orphan `json:"not_reaped"`
	Unaccounted int             `json:"unaccounted"`
	Problems    []string        `json:"problems"`
	NotSearched []string        `json:"not_searched,omitempty"`
	Ledger      string          `json:"ledger,omitempty"`
	Login       string          `json:"brev_login,omitempty"`
}

// reapReport prints what reap found (and, with --yes, did), what it left
// and why, and where it could not look, as lines or as one JSON object.
func reapReport(sio stdio, f reapFlags, r *runner.Reaper) error {
	if f.json {
		j := reapJSON{Found: append([]runner.Orphan{}, r.Found...), NotReaped: append([]runner.Orphan{}, r.NotReaped...),
			Unaccounted: len(r.Unaccounted()), Problems: []string{}, NotSearched: r.NotSearched, Ledger: r.Ledger, Login: r.Login}
		for _, p := range r.Problems {
			j.Problems = append(j.Problems, p.Error())
		}
		return writeJSON(sio.out, j)
	}
	w := escapeWriter{sio.out}
	switch {
	case len(r.Found) > 0:
	case len(r.Problems) > 0:
		fmt.Fprintln(w, "nothing found to reap where reap could look; it could not look everywhere (below)")
	case len(r.Unaccounted()) > 0:
		fmt.Fprintln(w, "nothing reap deletes on its own; but see what it did not reap (below)")
	default:
		fmt.Fprintln(w, "nothing to reap")
	}
	for _, o := range r.Found {
		switch {
		case o.Removed == nil:
			fmt.Fprintf(w, "%-14s %-50s %s\n", o.Kind, o.Name, o.Detail)
		case *o.Removed:
			fmt.Fprintf(w, "%s %s: removed\n", o.Kind, o.Name)
		default:
			fmt.Fprintf(w, "%s %s: NOT removed: %s\n", o.Kind, o.Name, o.Error)
		}
	}
	if !f.yes && len(r.Found) > 0 {
		again := "taoflow reap --yes"
		if len(f.names) > 0 || f.unrecorded {
			again = "it again with --yes"
		}
		fmt.Fprintf(w, "%d found; run %s to delete them\n", len(r.Found), again)
	}
	if len(r.NotReaped) > 0 {
		fmt.Fprintf(w, "not reaped (%d):\n", len(r.NotReaped))
		for _, o := range r.NotReaped {
			fmt.Fprintf(w, "  %s %s (%s): %s\n", o.Kind, o.Name, o.Detail, o.Why)
			if o.Command != "" {
				fmt.Fprintf(w, "    remove it with: %s\n", o.Command)
			}
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "could not search (there may be leftovers reap did not see):")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %v\n", p)
		}
	}
	for _, n := range r.NotSearched {
		fmt.Fprintf(w, "not searched: %s\n", n)
	}
	return nil
}

// otherStates are the state directories in this user's index of states
// other than dir.
func otherStates(dir string) ([]string, error) {
	own, _ := filepath.Abs(dir)
	indexed, err := state.Indexed(state.IndexFile(os.Getenv))
	var out []string
	for _, d := range indexed {
		if d != own {
			out = append(out, d)
		}
	}
	return out, err
}
