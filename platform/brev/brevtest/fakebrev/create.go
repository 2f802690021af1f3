package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

// validName is brev's pkg/names/validate.go rule.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

type createFlags struct {
	name, types, mode        string
	count, parallel, timeout int
	detached, dryRun         bool
	search                   searchFilters
}

func (a *app) createCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:     "create [name]",
		Aliases: []string{"provision"},
		Short:   "Create GPU instances with automatic retry",
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.name == "" && len(args) > 0 {
				f.name = args[0] // extra positionals are ignored
			}
			return a.create(f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.name, "name", "n", "", "base name for the instances")
	fl.StringVarP(&f.types, "type", "t", "", "comma-separated instance types to try, in order")
	fl.IntVarP(&f.count, "count", "c", 1, "number of instances to create")
	fl.IntVarP(&f.parallel, "parallel", "p", 1, "number of parallel creation attempts")
	fl.BoolVarP(&f.detached, "detached", "d", false, "don't wait for the instances to be ready")
	fl.IntVar(&f.timeout, "timeout", 300, "seconds to wait for each instance to be ready")
	fl.StringP("startup-script", "s", "", "startup script (inline, or @file)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show matching instance types without creating")
	fl.StringVarP(&f.mode, "mode", "m", "vm", "vm, k8s, container or compose")
	fl.Bool("jupyter", true, "install jupyter")
	fl.String("container-image", "", "container image (container mode)")
	fl.String("compose-file", "", "compose file (compose mode)")
	fl.StringP("launchable", "l", "", "launchable id")
	// The search filters, as search has them, less the short flags that
	// create uses for itself (-p, -c, -d, -t).
	fl.StringVarP(&f.search.gpuName, "gpu-name", "g", "", "filter by GPU name (case-insensitive substring)")
	fl.StringVar(&f.search.provider, "provider", "", "filter by provider")
	fl.Float64VarP(&f.search.minVRAM, "min-vram", "v", 0, "minimum VRAM per GPU (GB)")
	fl.Float64Var(&f.search.minTotalVRAM, "min-total-vram", 0, "minimum total VRAM (GB)")
	fl.Float64Var(&f.search.minCap, "min-capability", 0, "minimum compute capability")
	fl.Float64Var(&f.search.minDisk, "min-disk", 0, "minimum disk (GB)")
	fl.IntVar(&f.search.maxBoot, "max-boot-time", 0, "maximum boot time (minutes)")
	fl.BoolVar(&f.search.stoppable, "stoppable", false, "only stoppable types")
	fl.BoolVar(&f.search.rebootable, "rebootable", false, "only rebootable types")
	fl.BoolVar(&f.search.flexPorts, "flex-ports", false, "only types with flexible ports")
	fl.StringVar(&f.search.sort, "sort", "price", "sort by")
	fl.BoolVar(&f.search.desc, "desc", false, "sort descending")
	return cmd
}

// stdinTypes parses piped stdin as instance types: a JSON array (from
// `brev search --json`: objects with "type", or strings) or a table whose
// first column is the type.
func (a *app) stdinTypes() ([]string, error) {
	if !a.stdinPiped {
		return nil, nil
	}
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	var arr []json.RawMessage
	if json.Unmarshal(b, &arr) == nil {
		var types []string
		for _, raw := range arr {
			var s string
			var obj struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(raw, &s) == nil && s != "" {
				types = append(types, s)
			} else if json.Unmarshal(raw, &obj) == nil && obj.Type != "" {
				types = append(types, obj.Type)
			}
		}
		return types, nil
	}
	var types []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "TYPE" {
			continue
		}
		types = append(types, fields[0])
	}
	return types, nil
}

func (a *app) create(f createFlags) error {
	var types []string
	for _, t := range strings.Split(f.types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			types = append(types, t)
		}
	}
	piped, err := a.stdinTypes()
	if err != nil {
		return err
	}
	types = append(types, piped...)

	switch {
	case f.name == "":
		return errors.New("name is required")
	case len(f.name) > 63:
		return fmt.Errorf("name must be 63 characters or fewer (got %d)", len(f.name))
	case !validName.MatchString(f.name):
		return errors.New("name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots")
	case f.count < 1:
		return errors.New("--count must be at least 1")
	}
	switch f.mode {
	case "vm", "k8s", "container", "compose":
	default:
		return fmt.Errorf("invalid mode %q: must be one of vm, k8s, container, compose", f.mode)
	}
	if len(types) == 0 {
		// brev's defaults apply unless overridden: >= 20 GB total VRAM,
		// >= 500 GB disk, capability >= 8.0; boot < 7 min with no filter.
		sf := f.search
		if !sf.any() {
			sf.maxBoot = 7
		}
		if sf.minTotalVRAM == 0 {
			sf.minTotalVRAM = 20
		}
		if sf.minDisk == 0 {
			sf.minDisk = 500
		}
		if sf.minCap == 0 {
			sf.minCap = 8.0
		}
		offers, err := sf.match()
		if err != nil {
			return err
		}
		for _, o := range offers {
			types = append(types, o.Type)
		}
		if len(types) == 0 {
			return errors.New("no GPU instances match the specified filters. Try 'brev search' to see available options")
		}
	}
	names := []string{f.name}
	if f.count > 1 {
		names = names[:0]
		for n := 1; n <= f.count; n++ {
			names = append(names, fmt.Sprintf("%s-%d", f.name, n))
		}
	}
	a.call.Names = names

	// Progress goes to stderr when stdout is piped, to stdout on a terminal.
	out := a.stderr
	if a.stdoutTTY {
		out = a.stdout
	}
	if f.dryRun {
		fmt.Fprintf(out, "Instance types that would be tried: %s\n", strings.Join(types, ", "))
		return nil
	}
	fmt.Fprintf(out, "Attempting to create %d instance(s) with %d parallel attempts\n", f.count, f.parallel)
	fmt.Fprintf(out, "Instance types to try: %s\n", strings.Join(types, ", "))

	var created []fakestate.Instance
	pending := names
	for _, typ := range types {
		if len(pending) == 0 {
			break
		}
		// Each type is checked against the org's catalogue first.
		switch o, ok := lookup(typ); {
		case !ok:
			fmt.Fprintf(out, "Skipping: instance type %q is not a recognized type; see 'brev search'\n", typ)
			continue
		case !o.Available || a.opts.NoCapacity(typ):
			fmt.Fprintf(out, "Skipping: instance type %q is currently unavailable (no capacity); trying the next type\n", typ)
			continue
		}
		fmt.Fprintf(out, "\nTrying %s for %d instance(s)...\n", typ, len(pending))
		var retry []string
		for _, name := range pending {
			fmt.Fprintf(out, "[Worker 1] Trying %s for instance '%s'...\n", typ, name)
			a.spin("Creating instance...")
			inst, eof, err := a.register(name, typ)
			switch {
			case err != nil:
				return err
			case inst == nil:
				// The API's answer; fatal, as in the real create.
				fmt.Fprintf(out, "[Worker 1] %s Failed: duplicate workspace: a workspace named '%s' already exists\n", typ, name)
				return fmt.Errorf("Error: workspace '%s' already exists. Use a different name or delete the existing workspace", name)
			case eof:
				// The POST died after the API made the workspace: it
				// exists, but brev counts it as not created (an orphan).
				fmt.Fprintf(out, "[Worker 1] %s Failed: RESTY Post \"%s/api/organizations/%s/workspaces\": unexpected EOF\n", typ, apiURL, fakestate.OrgID)
				retry = append(retry, name)
			default:
				fmt.Fprintf(out, "[Worker 1] %s Success! Created instance '%s'\n", typ, name)
				created = append(created, *inst)
			}
		}
		pending = retry
	}
	if len(created) < f.count {
		fmt.Fprintf(a.stderr, "Warning: Only created %d/%d instances\n", len(created), f.count)
		if len(created) > 0 {
			fmt.Fprintln(a.stderr, "Created instances (not cleaned up):")
			for _, i := range created {
				fmt.Fprintf(a.stderr, "  - %s (ID: %s)\n", i.Name, i.ID)
			}
		}
		return fmt.Errorf("could only create %d/%d instances", len(created), f.count)
	}

	if !f.detached {
		fmt.Fprintf(out, "\nWaiting for instance(s) to be ready...\nYou can safely ctrl+c to exit\n")
		for _, i := range created {
			fmt.Fprintf(out, "  %s: %s\n", i.Name, a.waitRunning(i.ID, i.Name, max(f.timeout/5, 1)))
		}
	}
	if a.stdoutTTY {
		fmt.Fprintf(a.stdout, "\nSuccessfully created %d instance(s)!\n", len(created))
		for _, i := range created {
			fmt.Fprintf(a.stdout, "Instance: %s\n  ID: %s\n  Type: %s\n  Connect: brev open %s / brev shell %s\n", i.Name, i.ID, i.Type, i.Name, i.Name)
		}
		return nil
	}
	for _, i := range created {
		fmt.Fprintln(a.stdout, i.Name)
	}
	return nil
}

// register is the create POST: it adds name as a DEPLOYING instance of
// type typ with a fresh sandbox, unless the name is taken (also while
// DELETING): then it returns a nil instance. eof says a create-eof fault
// fired: the instance exists, but the caller must report failure.
func (a *app) register(name, typ string) (inst *fakestate.Instance, eof bool, err error) {
	err = fakestate.Update(a.dir, func(s *fakestate.State) error {
		for _, i := range s.Instances {
			if i.Name == name {
				return nil
			}
		}
		sandbox := filepath.Join(a.dir, fakestate.SandboxDir, name)
		if err := os.RemoveAll(sandbox); err != nil {
			return fmt.Errorf("fake brev: reset sandbox: %w", err)
		}
		if err := os.MkdirAll(sandbox, 0o700); err != nil {
			return fmt.Errorf("fake brev: make sandbox: %w", err)
		}
		if err := writeMachineBin(a.dir, sandbox, name); err != nil {
			return fmt.Errorf("fake brev: make the sandbox's commands: %w", err)
		}
		i := &fakestate.Instance{Name: name, ID: fakestate.NewID(), Status: fakestate.Deploying, Type: typ, Sandbox: sandbox,
			CreatedAt: time.Now().UnixNano()}
		switch {
		case s.TakeFault(fakestate.FaultStuckDeploying, name):
			i.Fate = fakestate.FateStuck
		case s.TakeFault(fakestate.FaultCreateFailure, name):
			i.Fate = fakestate.FateFailure
		}
		if s.TakeFault(fakestate.FaultCreateEOF, name) {
			i.Orphan, eof = true, true
		}
		s.Instances = append(s.Instances, i)
		c := *i
		inst = &c
		return nil
	})
	return inst, eof, err
}

// waitRunning polls the instance with id up to polls times, each poll one
// tick of that instance alone, and says how the wait ended. Like the real
// create it waits for RUNNING only, and a failure is only reported.
func (a *app) waitRunning(id, name string, polls int) string {
	for p := 0; p < polls; p++ {
		a.spin("Waiting for instance...")
		status := ""
		err := fakestate.Update(a.dir, func(s *fakestate.State) error {
			s.Tick(func(i *fakestate.Instance) bool { return i.ID == id })
			if i := s.Find(id); i != nil {
				status = i.Status
			}
			return nil
		})
		switch {
		case err != nil:
			return fmt.Sprintf("instance %s failed: %v", name, err)
		case status == fakestate.Running:
			return "Ready"
		case status == fakestate.Failure:
			return fmt.Sprintf("instance %s failed: instance entered FAILURE state", name)
		case status == "":
			return fmt.Sprintf("instance %s failed: instance with id/name %s not found", name, id)
		}
	}
	return "Timeout waiting for ready state"
}
