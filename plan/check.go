package plan

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// checker runs the static checks of a plan that passed (or partly passed)
// the schema.
type checker struct {
	p     *Plan
	d     *diags
	lines [][]byte // the source split into lines, made on first use
}

func check(p *Plan, d *diags) {
	c := &checker{p: p, d: d}
	c.ids()
	c.platform()
	c.instances()
	c.secretsDeclared()
	c.notifySecret()
	for _, s := range p.AllSteps() {
		c.step(s)
	}
	c.cycles()
	c.numbers()
	c.nodes()
	c.expressions()
	c.commands()
	c.slots()
	c.runWithoutWait()
	c.uploadAfterDelete()
	c.autostop()
}

func (c *checker) ids() {
	for _, s := range c.p.AllSteps() {
		if s.ID == "" {
			continue
		}
		if first := c.p.Step(s.ID); first != s {
			c.d.errorf(s.IDPos, "duplicate step id %q (first used at line %d)", clip(s.ID), first.IDPos.Line)
		}
	}
}

func (c *checker) platform() {
	pl := c.p.Platform
	if pl.Transport == "exec" && pl.Kind != PlatformBrev {
		c.d.errorf(pl.Pos, "transport: exec is a brev option; platform %s runs commands over its own transport", pl.Kind)
	}
}

func (c *checker) instances() {
	kind := c.p.Platform.Kind
	for _, in := range c.p.Instances {
		if in.Name == "all" {
			c.d.errorf(in.Pos, "an instance cannot be named \"all\": on: all means every instance")
		}
		switch kind {
		case PlatformLocal:
			if in.Create || in.Existing != "" || in.Host != "" {
				c.d.errorf(in.Pos, "instance %q: local instances are sandboxes on this host; create, existing and host apply to the brev and ssh platforms", in.Name)
			}
		case PlatformSSH:
			if in.Create || in.Existing != "" {
				c.d.errorf(in.Pos, "instance %q: the ssh platform reaches existing hosts; use host: user@host:port (or an ssh config alias) instead of create/existing", in.Name)
			} else if in.Host == "" {
				c.d.errorf(in.Pos, "instance %q: the ssh platform needs host: user@host:port (or an ssh config alias)", in.Name)
			}
		case PlatformBrev:
			switch {
			case in.Host != "":
				c.d.errorf(in.Pos, "instance %q: host: is for the ssh platform; brev instances use create: {type: …} or existing: NAME", in.Name)
			case in.Create && in.Existing != "":
				c.d.errorf(in.Pos, "instance %q: give either create: or existing:, not both", in.Name)
			case !in.Create && in.Existing == "":
				c.d.errorf(in.Pos, "instance %q: brev instances need create: {type: …} (made and deleted by this run) or existing: NAME (reused, never deleted)", in.Name)
			}
		}
		if in.Keep && !in.RunCreates(kind) {
			c.d.warnf(in.Pos, "instance %q: keep: only matters for instances this run creates", in.Name)
		}
	}
}

func (c *checker) step(s *Step) {
	// needs
	for _, n := range s.Needs {
		t := c.p.Step(n.Name)
		switch {
		case t == nil:
			c.d.errorf(n.Pos, "unknown step %q in needs%s", clip(n.Name), c.suggest(n.Name, c.stepIDs()))
		case s.Finally && !t.Finally:
			c.d.errorf(n.Pos, "finally step %q cannot need step %q: finalizers run after all steps anyway", s.ID, n.Name)
		case !s.Finally && t.Finally:
			c.d.errorf(n.Pos, "step %q cannot need finalizer %q: finalizers run after all steps", s.ID, n.Name)
		}
	}
	// on
	for _, n := range s.On {
		if n.Name != "all" && c.p.Instance(n.Name) == nil {
			c.d.errorf(n.Pos, "unknown instance %q in on%s", clip(n.Name), c.suggest(n.Name, c.p.InstanceNames()))
		}
	}
	if s.On != nil && len(s.On) == 0 {
		c.d.errorf(s.IDPos, "step %q: on: is empty, so the step would run nowhere", s.ID)
	}
	c.paths(s) // paths.go
	// matrix
	if m := s.Matrix; m != nil {
		switch s.Uses {
		case KindPreflight, KindNGCAuth, KindDelete:
			c.d.errorf(m.Pos, "a %s step runs once per instance; it takes no matrix", s.Uses)
		}
		if m.Inherit && c.p.MatrixRoot(s) == nil {
			c.d.errorf(m.Pos, "matrix: inherit repeats the matrix of a step in needs, but step %q needs no matrix step", s.ID)
		}
		for _, a := range m.Axes {
			seen := map[string]bool{}
			for _, v := range a.Values {
				if seen[v] {
					c.d.errorf(a.Pos, "matrix key %q lists the value %q twice", a.Name, clip(v))
					break
				}
				seen[v] = true
			}
		}
		if n := m.Cells(); n > MaxCells {
			c.d.errorf(m.Pos, "step %q: the matrix has %s cells (the product of %d keys' value counts); at most %d are allowed: split the sweep into several plans or steps", s.ID, cellCount(m), len(m.Axes), MaxCells)
		}
		if !m.Inherit && s.Finally {
			c.d.errorf(m.Pos, "finalizers run once per instance; they take no matrix")
		}
	}
	if s.MaxParallel > 0 && s.Matrix == nil {
		c.d.warnf(s.IDPos, "step %q: max_parallel only limits matrix cells; this step has no matrix", s.ID)
	}
	// kind-specific
	w := s.With
	switch s.Uses {
	case KindWait:
		if !slices.ContainsFunc(s.Needs, func(n Name) bool { t := c.p.Step(n.Name); return t != nil && t.Uses == KindRun }) {
			c.d.errorf(s.IDPos, "wait step %q must need a run step: it waits for the jobs that step launched", s.ID)
		}
		c.waitWhereRun(s)
		c.waitPerCell(s)
	case KindSend, KindFetch:
		c.transfer(s) // transfer.go
	}
	if url, key := c.s3URL(s); url != nil && s.With.Get("env") == nil {
		var missing []string
		for _, n := range DefaultAWSSecrets {
			if !c.declared(n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			c.d.errorf(url.Pos, "%s step %q: with.%s is an s3:// URL, so the AWS CLI on the instance needs the secret%s %s (with.env names none, so the AWS CLI's own names are used): add %s to secrets: at the top of the plan (the values then come from taoflow's environment), or name your secrets in with.env (env: [] for none, when the instance has credentials of its own)",
				s.Uses, s.ID, key, plural(len(missing)), strings.Join(missing, " and "), strings.Join(missing, ", "))
		}
	}
	for _, n := range c.stepSecrets(s) {
		if !c.declared(n.Name) {
			c.d.errorf(n.Pos, "secret %q is not declared: add it to secrets: at the top of the plan (its value then comes from taoflow's environment)", n.Name)
		} else if c.p.Platform.Transport == "exec" && c.p.Platform.Kind == PlatformBrev &&
			!slices.ContainsFunc(c.p.Platform.InstanceEnv, func(e Name) bool { return e.Name == n.Name }) {
			c.d.errorf(n.Pos, "secret %q cannot travel over transport: exec (brev exec has no stdin); set it as a Brev secret on the instance and list it under platform.instance_env", n.Name)
		}
	}
	// durations must be positive
	if f := c.stepField(s, "timeout"); f != nil && s.Timeout <= 0 && f.Value.Kind == Scalar {
		if _, err := time.ParseDuration(f.Value.Text); err == nil {
			c.d.errorf(f.Value.Pos, "timeout must be longer than zero")
		}
	}
	for _, key := range []string{"timeout", "interval", "ready_timeout"} {
		if v := w.Get(key); v != nil && v.Kind == Scalar && !HasExpr(v.Text) {
			if dur, err := time.ParseDuration(v.Text); err == nil && dur <= 0 {
				c.d.errorf(v.Pos, "with.%s must be longer than zero", key)
			}
		}
	}
}

// numbers reports integers and durations that the schema accepts but that
// taoflow cannot use as written: an integer past int64 or written as 1e3
// (it read as 0: no retries, no max_parallel limit), a duration past
// 2562047h (it read as 0: no timeout).
func (c *checker) numbers() {
	type num struct {
		name    string
		v       *Value
		bounded bool // the schema gives a maximum, and reports past it
	}
	var ints, durs []num
	if pl := c.p.Root.Get("platform"); pl != nil && pl.Kind == Map {
		ints = append(ints, num{"platform.max_sessions", pl.Get("max_sessions"), true})
		durs = append(durs, num{"platform.connect_timeout", pl.Get("connect_timeout"), false})
	}
	if in := c.p.Root.Get("instances"); in != nil {
		for _, f := range in.Fields {
			ints = append(ints, num{"slots", f.Value.Get("slots"), true})
		}
	}
	for _, s := range c.p.AllSteps() {
		v, _, ok := c.p.Root.Lookup(s.pointer)
		if !ok {
			continue
		}
		if mp := v.Get("max_parallel"); mp != nil {
			ints = append(ints, num{"max_parallel", mp, false})
		}
		if t := v.Get("timeout"); t != nil {
			durs = append(durs, num{"timeout", t, false})
		}
		if r := v.Get("retries"); r != nil && r.Kind == Map {
			ints = append(ints, num{"retries.max", r.Get("max"), false})
			durs = append(durs, num{"retries.backoff", r.Get("backoff"), false})
		} else if r != nil {
			ints = append(ints, num{"retries", r, false})
		}
		for _, key := range []string{"with.timeout", "with.interval", "with.ready_timeout"} {
			if d := s.With.Get(key[len("with."):]); d != nil {
				durs = append(durs, num{key, d, false})
			}
		}
		if g := s.With.Get("gpus"); g != nil && g.Tag != "!!str" {
			ints = append(ints, num{"with.gpus", g, false})
		}
	}
	for _, n := range ints {
		v := n.v
		if v == nil || v.Kind != Scalar || (v.Tag != "!!int" && v.Tag != "!!float") {
			continue // the schema reports other shapes
		}
		if _, ok := intOf(v); ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(v.Text, "_", ""), 64)
		switch {
		case err == nil && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt64:
			c.d.errorf(v.Pos, "%s: %s is not read as a whole number (it would count as 0 or the default); write it in digits: %.0f", n.name, clip(v.Text), f)
		case !n.bounded:
			c.d.errorf(v.Pos, "%s: %s is out of range (it would be read as 0); at most %d", n.name, clip(v.Text), int64(math.MaxInt64))
		}
	}
	for _, n := range durs {
		v := n.v
		if v == nil || !v.IsString() || HasExpr(v.Text) || !durationRE.MatchString(v.Text) {
			continue // the schema reports other shapes
		}
		if _, err := time.ParseDuration(v.Text); err != nil {
			c.d.errorf(v.Pos, "%s: %s is out of range (it would be read as 0, which for a timeout means none); a duration is at most 2562047h (about 292 years)", n.name, clip(v.Text))
		}
	}
}

var durationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// nodes refuses a plan that expands to more than MaxNodes nodes, at the
// step that passes the bound.
func (c *checker) nodes() {
	total := 0
	for _, s := range c.p.AllSteps() {
		n := len(c.p.Pool(s))
		if root := c.p.MatrixRoot(s); root != nil {
			n = root.Matrix.Cells() // at most MaxCells+1
			if n > MaxCells {
				return // reported at the matrix
			}
		}
		total += n
		if total > MaxNodes {
			c.d.errorf(s.IDPos, "the plan expands to more than %d nodes by step %q (each step runs once per instance, or once per cell of its matrix); split it into several plans", MaxNodes, s.ID)
			return
		}
	}
}

// cellCount writes the exact number of cells of a matrix, however large.
func cellCount(m *Matrix) string {
	n := big.NewInt(1)
	for _, a := range m.Axes {
		n.Mul(n, big.NewInt(int64(len(a.Values))))
	}
	return n.String()
}

func (c *checker) stepField(s *Step, key string) *Field {
	v, _, ok := c.p.Root.Lookup(s.pointer)
	if !ok {
		return nil
	}
	return v.Field(key)
}

func (c *checker) stepIDs() []string {
	var out []string
	for _, s := range c.p.AllSteps() {
		out = append(out, s.ID)
	}
	return out
}

func (c *checker) suggest(name string, options []string) string {
	if best := Closest(name, options); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(options) > 0 && len(options) <= 12 {
		return " (known: " + strings.Join(options, ", ") + ")"
	}
	return ""
}

// Closest returns the option nearest to name (at most two edits away), or
// "" when none is: the "did you mean" of a misspelt name.
func Closest(name string, options []string) string {
	best, bestD := "", 3
	for _, o := range options {
		if d := editDistance(name, o); d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 99
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
