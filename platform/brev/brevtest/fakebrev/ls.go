package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

// apiURL is the real brev API's base, used in error texts.
const apiURL = "https://brevapi.us-west-2-prod.control-plane.brev.dev"

// workspaceJSON is one element of `ls --json`, with the real key set.
type workspaceJSON struct {
	Name         string `json:"name"`
	ID           string `json:"id"`
	Status       string `json:"status"`
	BuildStatus  string `json:"build_status"`
	ShellStatus  string `json:"shell_status"`
	HealthStatus string `json:"health_status"`
	InstanceType string `json:"instance_type"`
	InstanceKind string `json:"instance_kind"`
	GPU          string `json:"gpu"`
}

func workspace(i *fakestate.Instance) workspaceJSON {
	w := workspaceJSON{
		Name:         i.Name,
		ID:           i.ID,
		Status:       i.Status,
		InstanceType: i.Type,
		GPU:          "-",
		InstanceKind: "cpu",
		HealthStatus: "UNAVAILABLE",
		BuildStatus:  "COMPLETED",
		ShellStatus:  "NOT READY",
	}
	if o, ok := lookup(i.Type); ok {
		w.GPU, w.InstanceKind = o.GPUName, "gpu"
	}
	switch {
	case i.Orphan:
		w.BuildStatus = "" // brev-cli #378: stays empty forever
	case i.Status == fakestate.Deploying:
		w.BuildStatus = "BUILDING"
	case i.Status == fakestate.Failure:
		w.BuildStatus = "CREATE_FAILED"
	}
	if i.Status == fakestate.Running {
		w.HealthStatus = "HEALTHY"
		if w.BuildStatus == "COMPLETED" {
			w.ShellStatus = "READY"
		}
	}
	return w
}

func (a *app) lsCmd() *cobra.Command {
	var asJSON, all bool
	var org string
	cmd := &cobra.Command{
		Use:     "ls [instances|orgs|nodes]",
		Aliases: []string{"list"},
		Short:   "List instances within active org",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return errors.New("too many args provided")
			}
			what := "instances"
			if len(args) == 1 {
				what = strings.TrimSuffix(args[0], "s")
				switch what {
				case "instance", "workspace":
					what = "instances"
				case "org", "node":
				default:
					return fmt.Errorf("unknown argument %q: use instances, orgs or nodes", args[0])
				}
			}
			return a.ls(what, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "output as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "show all instances in the org")
	cmd.Flags().StringVarP(&org, "org", "o", "", "organization (will override active org)")
	return cmd
}

// ls is one "tick" of the fake cloud: every instance moves on one poll,
// then the list is printed.
func (a *app) ls(what string, asJSON bool) error {
	var list []workspaceJSON
	var failed error
	err := fakestate.Update(a.dir, func(s *fakestate.State) error {
		if s.TakeFault(fakestate.FaultLsError, "") {
			// Saved with the fault used up; no tick.
			failed = fmt.Errorf(`Get "%s/api/organizations/%s/workspaces?local=true&utm_source=cli": dial tcp: lookup brevapi.us-west-2-prod.control-plane.brev.dev: i/o timeout`,
				apiURL, fakestate.OrgID)
			return nil
		}
		s.Tick(nil)
		for _, i := range s.Instances {
			list = append(list, workspace(i))
		}
		return nil
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return err
	}
	switch what {
	case "org":
		return a.lsOrgs(asJSON)
	case "node":
		if asJSON {
			fmt.Fprintln(a.stdout, "[]")
		} else {
			fmt.Fprintf(a.stdout, "No external nodes in org %s\n", fakestate.Org)
		}
		return nil
	}
	if asJSON {
		var v any = struct {
			Workspaces []workspaceJSON `json:"workspaces"`
		}{list}
		if a.opts.ArrayJSON {
			v = list
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, string(b))
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "No instances in org %s\n\nStart a new instance:\n\tbrev create my-instance\n", fakestate.Org)
		return nil
	}
	fmt.Fprintf(a.stdout, "You have %d instances in Org %s\n", len(list), fakestate.Org)
	rows := [][]string{{"NAME", "STATUS", "BUILD", "SHELL", "ID", "MACHINE", "GPU"}}
	for _, w := range list {
		rows = append(rows, []string{w.Name, w.Status, w.BuildStatus, w.ShellStatus, w.ID, w.InstanceType, w.GPU})
	}
	fmt.Fprint(a.stdout, table(rows))
	fmt.Fprintln(a.stdout)
	return nil
}

func (a *app) lsOrgs(asJSON bool) error {
	if asJSON {
		fmt.Fprintf(a.stdout, "[\n  {\n    \"name\": %q,\n    \"id\": %q,\n    \"is_active\": true\n  }\n]\n", fakestate.Org, fakestate.OrgID)
		return nil
	}
	fmt.Fprint(a.stdout, table([][]string{{"NAME", "ID"}, {fakestate.Org + "*", fakestate.OrgID}}))
	return nil
}

// table renders rows like go-pretty with no borders: one space of padding
// each side of every cell, columns as wide as their widest cell.
func table(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for c, cell := range r {
			line.WriteString(" " + cell + strings.Repeat(" ", widths[c]-len([]rune(cell))) + " ")
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}
