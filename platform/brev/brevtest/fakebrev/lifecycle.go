package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

func (a *app) deleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete [instance...]",
		Short: "Delete instances",
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := a.names(args)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				return errNameRequired
			}
			return a.eachName(names, a.deleteOne, "Deleting instance %s. This can take a few minutes. Run 'brev ls' to check status\n")
		},
	}
}

// eachName runs fn for every name in turn, collecting failures; on a
// terminal it prints ttyMsg per success, when piped the names, but only
// if all succeeded.
func (a *app) eachName(names []string, fn func(string) error, ttyMsg string) error {
	var errs []error
	for _, name := range names {
		if err := fn(name); err != nil {
			errs = append(errs, err)
			continue
		}
		if a.stdoutTTY {
			fmt.Fprintf(a.stdout, ttyMsg, name)
		}
	}
	if len(errs) > 0 {
		return multiError(errs)
	}
	if !a.stdoutTTY {
		for _, name := range names {
			fmt.Fprintln(a.stdout, name)
		}
	}
	return nil
}

// deleteOne is DELETE /api/workspaces/{id}: it returns at once, the
// instance DELETING until enough ls ticks have passed.
func (a *app) deleteOne(name string) error {
	var failed error
	err := fakestate.Update(a.dir, func(s *fakestate.State) error {
		i := s.Find(name)
		switch {
		case i == nil:
			failed = notFound(name, "cmd/delete.deleteWorkspace", "cmd/delete.handleAdminUser")
		case s.TakeFault(fakestate.FaultDeleteError, i.Name):
			// Saved: the fault is used up, the instance unchanged.
			failed = stackError(fmt.Sprintf("DELETE %s/api/workspaces/%s: 502 Bad Gateway: upstream provider error, please try again", apiURL, i.ID),
				"cmd/delete.deleteWorkspace")
		case i.Status != fakestate.Deleting:
			i.SetStatus(fakestate.Deleting)
			if i.CreatedAt != 0 {
				s.Bills = append(s.Bills, fakestate.Bill{Name: i.Name, Type: i.Type, Start: i.CreatedAt, End: time.Now().UnixNano()})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return failed
}

func (a *app) stopCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "stop [instance...]",
		Short: "Stop instances",
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := a.names(args)
			if err != nil {
				return err
			}
			if all {
				st, err := fakestate.Read(a.dir)
				if err != nil {
					return err
				}
				for _, i := range st.Instances {
					if o, ok := lookup(i.Type); i.Status == fakestate.Running && ok && o.Stoppable {
						names = append(names, i.Name)
					}
				}
				a.call.Names = names
			}
			if len(names) == 0 && !all {
				return errNameRequired
			}
			return a.eachName(names, a.stopOne, "Stopping instance %s.\nNote: this can take a few seconds. Run 'brev ls' to check status\n")
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "stop all instances")
	return cmd
}

// stopOne is PUT /api/workspaces/{id}/stop: RUNNING becomes STOPPING, and
// STOPPED at the next tick.
//
// From v0.6.327 on, brev checks that the instance's type is stoppable
// before it calls the API: `instance "X" does not support stop.`
func (a *app) stopOne(name string) error {
	checks := !versionBefore(a.opts.EffVersion(), "v0.6.327")
	return fakestate.Update(a.dir, func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return notFound(name, "cmd/stop.stopWorkspace", "cmd/util.GetUserWorkspaceByNameOrIDErr")
		}
		if o, ok := lookup(i.Type); checks && (!ok || !o.Stoppable) {
			return fmt.Errorf("instance %q does not support stop.", i.Name)
		}
		switch i.Status {
		case fakestate.Running:
			i.SetStatus(fakestate.Stopping)
		case fakestate.Stopping, fakestate.Stopped:
		default:
			return stackError(fmt.Sprintf("PUT %s/api/workspaces/%s/stop: 400 Bad Request: workspace is %s and cannot be stopped", apiURL, i.ID, i.Status),
				"cmd/stop.stopWorkspace")
		}
		return nil
	})
}

func (a *app) startCmd() *cobra.Command {
	var detached bool
	cmd := &cobra.Command{
		Use:   "start [instance|git-url|path...]",
		Short: "Start a stopped instance, or create one from a repo or path",
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := a.names(args)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				return errNameRequired
			}
			if !a.stdinPiped {
				// Single mode: only the first name counts.
				if err := a.startOne(names[0], detached); err != nil {
					return err
				}
				if !a.stdoutTTY {
					fmt.Fprintln(a.stdout, names[0])
				}
				return nil
			}
			// Batch mode: piped stdin and some names; all detached.
			var errs []error
			for _, name := range names {
				if err := a.startOne(name, true); err != nil {
					fmt.Fprintf(a.stderr, "Error starting %s: %v\n", name, err)
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return multiError(errs)
			}
			if !a.stdoutTTY {
				for _, name := range names {
					fmt.Fprintln(a.stdout, name)
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&detached, "detached", "d", false, "run the command in the background instead of blocking the shell")
	fl.StringP("name", "n", "", "name your instance when creating a new one")
	fl.StringP("org", "o", "", "organization (will override active org)")
	fl.StringP("setup-script", "s", "", "takes a raw gist url to an env setup script")
	fl.StringP("setup-repo", "r", "", "repo that holds a setup script")
	fl.StringP("setup-path", "p", ".brev/setup.sh", "path to env setup script")
	fl.BoolP("empty", "e", false, "create an empty workspace")
	fl.StringP("gpu", "g", "n1-highmem-4:nvidia-tesla-t4:1", "GPU instance type")
	return cmd
}

// startOne is PUT /api/workspaces/{id}/start on a STOPPED instance. An
// unknown name is taken for a local path that does not exist: brev says so
// and succeeds. Without detached it polls, with no timeout, until RUNNING.
func (a *app) startOne(name string, detached bool) error {
	var id string
	err := fakestate.Update(a.dir, func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return nil
		}
		if i.Status != fakestate.Stopped {
			return fmt.Errorf("Instance is not stopped status=%s", i.Status)
		}
		i.SetStatus(fakestate.Starting)
		id = i.ID
		return nil
	})
	if err != nil {
		return err
	}
	if id == "" {
		fmt.Fprintln(a.stdout, "tried to start with local path but path not found")
		return nil
	}
	fmt.Fprintf(a.stdout, "Instance %s is starting. \nNote: this can take about a minute. Run 'brev ls' to check status\n", name)
	if detached {
		return nil
	}
	for poll := 0; ; poll++ {
		if poll > 0 {
			time.Sleep(50 * time.Millisecond) // a stand-in for brev's 5 s poll
		}
		status := ""
		if err := fakestate.Update(a.dir, func(s *fakestate.State) error {
			s.Tick(func(i *fakestate.Instance) bool { return i.ID == id })
			if i := s.Find(id); i != nil {
				status = i.Status
			}
			return nil
		}); err != nil {
			return err
		}
		switch status {
		case fakestate.Running:
			fmt.Fprintf(a.stdout, "Your instance is ready!\nTo connect to your instance:\n\tbrev shell %s\n", name)
			return nil
		case "":
			return notFound(name)
		}
	}
}

// versionBefore reports whether version v ("v0.6.320") is older than w.
func versionBefore(v, w string) bool {
	parse := func(s string) [3]int {
		var out [3]int
		for n, part := range strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3) {
			digits := strings.TrimRightFunc(part, func(r rune) bool { return r < '0' || r > '9' })
			out[n], _ = strconv.Atoi(digits)
		}
		return out
	}
	a, b := parse(v), parse(w)
	for n := range a {
		if a[n] != b[n] {
			return a[n] < b[n]
		}
	}
	return false
}
