package plan

import (
	"path/filepath"
	"time"
)

// Step kinds (the values of `uses`).
const (
	KindPreflight = "preflight"
	KindNGCAuth   = "ngc-auth"
	KindPull      = "pull"
	KindRun       = "run"
	KindWait      = "wait"
	KindUploadS3  = "upload-s3"
	KindDelete    = "delete"
	// KindSend copies files from the laptop (the plan's directory) to the
	// instance; KindDownloadS3 stages inputs in from S3 on the instance;
	// KindFetch copies an instance directory back to the laptop.
	KindSend       = "send"
	KindDownloadS3 = "download-s3"
	KindFetch      = "fetch"
)

// SavesResults reports whether a step of kind copies results off their
// instance (upload-s3, fetch): one that ran and did not succeed leaves the
// results only on the instance's disk, which must then not be deleted.
func SavesResults(kind string) bool {
	return kind == KindUploadS3 || kind == KindFetch
}

// Platform kinds.
const (
	PlatformLocal = "local"
	PlatformSSH   = "ssh"
	PlatformBrev  = "brev"
)

// Plan is a loaded plan file: the user's declaration, with positions.
type Plan struct {
	File        string
	Hash        string // sha256 of the file's bytes, hex
	Version     int
	Name        string
	NamePos     Pos
	Description string
	Platform    Platform
	Vars        []Var
	Secrets     []Name
	Instances   []*Instance
	Steps       []*Step
	Finally     []*Step
	FailFast    bool
	// NoSalvage is salvage: false: on a budget stop, Ctrl-C or failure the
	// uploads and fetches of cells whose jobs started do not run before
	// their instance is deleted (docs/design.md §8.6).
	NoSalvage bool
	Budget    Budget  // budget:, zero when absent
	Tags      []Tag   // tags:, in file order
	Notify    *Notify // notify:, nil when absent
	// Provenance is provenance: ("minimal" or "full"), the detail of the
	// provenance manifests and notifications carry; empty is minimal.
	Provenance string
	// Autostop is the plan-level autostop:, every instance's default; nil
	// when absent.
	Autostop *Autostop

	Root      *Value // the resolved YAML tree
	source    []byte
	stepIndex map[string]*Step
}

// Name is a name written in the plan, with its position.
type Name struct {
	Name string
	Pos  Pos
}

// Var is a plain parameter of the plan; --var NAME=VALUE and --var-file
// override it.
type Var struct {
	Name  string
	Value string
	Pos   Pos // the key
	// From says where Value was set, for messages: "vars: line 24",
	// "--var poll=30", "--var-file sweep.vars.yaml line 3".
	From string
}

// Platform says where the plan's instances are.
type Platform struct {
	Kind           string
	Pos            Pos
	Binary         string        // brev: the CLI to run
	Transport      string        // brev: ssh (default) or exec
	SSHConfig      string        // ssh: config file
	ConnectTimeout time.Duration // ssh/brev
	MaxSessions    int           // concurrent remote commands per instance
	InstanceEnv    []Name        // secrets already present in the instances' environment
}

// Instance is one machine of the plan.
type Instance struct {
	Name       string
	Pos        Pos
	CreateType string // brev: create with this type chain
	Create     bool
	// Select are create:'s filters (brev): the types that pass them, from
	// brev search, become the chain (narrowing CreateType when it is set).
	Select   Select
	Existing string // brev: reuse this instance
	Host     string // ssh: destination or alias
	Slots    int
	SlotsPos Pos // the slots: key, when written
	// GPUs is the declared GPU count (gpus:), 0 when preflight counts them.
	GPUs    int
	GPUsPos Pos
	Keep    bool
	// Autostop is the instance's autostop (its own autostop: over the
	// plan's), nil when it has none.
	Autostop *Autostop
}

// Select are the filters of a brev create: by GPU and price. Zero fields
// select everything.
type Select struct {
	GPU       string  // GPU name, a case-insensitive substring
	GPUs      int     // exactly this many GPUs
	MinVRAM   float64 // GB per GPU
	MinDisk   float64 // GB
	MaxPrice  float64 // US dollars per hour
	Stoppable bool
	Provider  string
}

// IsZero reports whether no filter is set.
func (s Select) IsZero() bool { return s == Select{} }

// Budget is the plan's budget: limits on a run's estimated cost and
// duration; zero fields are no limit.
type Budget struct {
	Pos         Pos
	MaxCost     float64 // US dollars, at list prices
	MaxDuration time.Duration
	// AllowUnpriced is unpriced: allow: under MaxCost, an instance of no
	// known price is created all the same (and not counted).
	AllowUnpriced bool
}

// DefaultBackoff is the wait before a step's first retry when retries:
// gives no backoff (the schema documents it as its default).
const DefaultBackoff = 10 * time.Second

// Step is one entry of `steps` or `finally`.
type Step struct {
	ID              string
	Pos             Pos // the step's first key
	IDPos           Pos
	Uses            string
	UsesPos         Pos
	Name            string
	Needs           []Name
	On              []Name // nil means every instance
	OnAll           bool
	Matrix          *Matrix
	Timeout         time.Duration
	Retries         int
	Backoff         time.Duration
	ContinueOnError bool
	MaxParallel     int
	With            *Value // nil when absent
	Finally         bool
	pointer         string // JSON pointer of the step in the plan ("/steps/3")
}

// Matrix is a step's matrix: keys with their values, or inherited from the
// matrix step it needs.
type Matrix struct {
	Pos     Pos
	Inherit bool
	Axes    []Axis
}

// Axis is one key of a matrix with its values as written.
type Axis struct {
	Name   string
	Pos    Pos
	Values []string
}

// MaxCells is the most cells a matrix may have, and MaxNodes the most
// nodes (steps × instances or cells) a plan may expand to; validate
// refuses more. A few lines of aliased matrices could otherwise ask for
// millions of nodes (a 120 kB plan ran `plan` out of memory at 3.4 GB).
const (
	MaxCells = 100_000
	MaxNodes = 250_000
)

// Cells returns the number of cells of a non-inherited matrix, or
// MaxCells+1 when there are more than MaxCells (the product is never
// computed past that, so it cannot overflow).
func (m *Matrix) Cells() int {
	if m == nil || m.Inherit {
		return 0
	}
	n := 1
	for _, a := range m.Axes {
		if len(a.Values) == 0 {
			return 0
		}
		if n > MaxCells/len(a.Values) {
			return MaxCells + 1
		}
		n *= len(a.Values)
	}
	return n
}

// RunCreates reports whether a run on platform kind creates the instance,
// and so records it, may bill for it and deletes it at teardown unless it
// has keep: true. Local sandboxes and brev create: are the run's; ssh hosts
// and brev existing: are used as they are and never deleted. The checker's
// keep: warning and the runner's Acquire both ask here.
func (in *Instance) RunCreates(kind string) bool {
	return kind == PlatformLocal || in.Create
}

// Bills reports whether the run creates the instance on a platform of kind
// that bills for it from its creation (brev).
func (in *Instance) Bills(kind string) bool {
	return kind == PlatformBrev && in.Create
}

// Instance returns the instance named name, or nil.
// Dir is the absolute directory of the plan file (${{ plan.dir }}): send's
// from and fetch's to are relative to it.
func (p *Plan) Dir() string {
	d, err := filepath.Abs(filepath.Dir(p.File))
	if err != nil {
		return filepath.Dir(p.File)
	}
	return d
}

func (p *Plan) Instance(name string) *Instance {
	for _, in := range p.Instances {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// Step returns the step (or finalizer) with the given id, or nil.
func (p *Plan) Step(id string) *Step {
	return p.stepIndex[id]
}

// index builds the step lookup, the one index of steps by id that every
// check and caller uses: the first of duplicate ids wins (validate reports
// the others), and a step without an id is not in it.
func (p *Plan) index() {
	p.stepIndex = map[string]*Step{}
	for _, s := range p.AllSteps() {
		if _, dup := p.stepIndex[s.ID]; !dup && s.ID != "" {
			p.stepIndex[s.ID] = s
		}
	}
}

// AllSteps returns steps followed by finalizers.
func (p *Plan) AllSteps() []*Step {
	out := make([]*Step, 0, len(p.Steps)+len(p.Finally))
	out = append(out, p.Steps...)
	return append(out, p.Finally...)
}

// Var returns the value of var name.
func (p *Plan) Var(name string) (string, bool) {
	for _, v := range p.Vars {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// InstanceNames returns the instances' names in file order.
func (p *Plan) InstanceNames() []string {
	out := make([]string, len(p.Instances))
	for i, in := range p.Instances {
		out[i] = in.Name
	}
	return out
}

// SecretNames returns the declared secret names.
func (p *Plan) SecretNames() []string {
	out := make([]string, len(p.Secrets))
	for i, s := range p.Secrets {
		out[i] = s.Name
	}
	return out
}

// Pool returns the instance names a step runs on (its `on`, or all).
func (p *Plan) Pool(s *Step) []string {
	if s.On == nil || s.OnAll {
		return p.InstanceNames()
	}
	out := make([]string, 0, len(s.On))
	for _, n := range s.On {
		if p.Instance(n.Name) != nil {
			out = append(out, n.Name)
		}
	}
	return out
}

// RunsContainers reports whether any step needs a container engine.
func (p *Plan) RunsContainers() bool {
	for _, s := range p.AllSteps() {
		switch s.Uses {
		case KindNGCAuth, KindPull:
			return true
		case KindRun:
			if s.With.Get("image") != nil {
				return true
			}
		}
	}
	return false
}

// MatrixRoot returns the step whose matrix s runs over: s itself when it has
// its own matrix, the root of the first matrix step it needs when it
// inherits (`matrix: inherit`), nil when s has no matrix.
func (p *Plan) MatrixRoot(s *Step) *Step {
	seen := map[*Step]bool{}
	for s != nil && s.Matrix != nil && !seen[s] {
		seen[s] = true
		if !s.Matrix.Inherit {
			return s
		}
		var next *Step
		for _, n := range s.Needs {
			if t := p.Step(n.Name); t != nil && t.Matrix != nil {
				next = t
				break
			}
		}
		s = next
	}
	return nil
}

// Billed returns the instances this plan creates on a platform that bills
// for them from creation (brev), in file order: what apply asks about.
func (p *Plan) Billed() []*Instance {
	var out []*Instance
	for _, in := range p.Instances {
		if in.Bills(p.Platform.Kind) {
			out = append(out, in)
		}
	}
	return out
}
