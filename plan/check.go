package plan

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taoflow/taoflow/secret"
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

func (c *checker) secretsDeclared() {
	declared := map[string]bool{}
	for _, s := range c.p.Secrets {
		if declared[s.Name] {
			continue
		}
		declared[s.Name] = true
	}
	for _, n := range c.p.Platform.InstanceEnv {
		if !declared[n.Name] {
			c.d.errorf(n.Pos, "instance_env names %q, which is not declared under secrets:", n.Name)
		}
	}
}

func (c *checker) declared(name string) bool {
	return slices.ContainsFunc(c.p.Secrets, func(n Name) bool { return n.Name == name })
}

// stepSecrets returns the secret names a step sends to its instance, with
// the position to blame.
func (c *checker) stepSecrets(s *Step) []Name {
	switch s.Uses {
	case KindRun, KindUploadS3, KindDownloadS3:
		if env := s.With.Get("env"); env != nil {
			return names(env)
		}
		if s.Uses != KindRun {
			// The AWS CLI's own names, when with.env names none: the two
			// keys are needed for an s3:// URL (impliedSecrets), the token
			// goes along when declared.
			var out []Name
			for _, n := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
				if c.declared(n) {
					out = append(out, Name{Name: n, Pos: s.IDPos})
				}
			}
			return out
		}
	case KindNGCAuth:
		if v := s.With.Get("secret"); v != nil {
			return []Name{{Name: v.Text, Pos: v.Pos}}
		}
		return []Name{{Name: "NGC_KEY", Pos: s.UsesPos}}
	}
	return nil
}

// DefaultAWSSecrets are the secrets an upload-s3 or download-s3 step with
// an s3:// URL and no with.env sends to the AWS CLI: its own variable
// names for the keys. They must be declared, as with.env's must.
var DefaultAWSSecrets = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

// s3URL returns the value of an upload-s3's to or a download-s3's from
// when it is an s3:// URL (vars substituted), and its key.
func (c *checker) s3URL(s *Step) (*Value, string) {
	key := "to"
	switch s.Uses {
	case KindUploadS3:
	case KindDownloadS3:
		key = "from"
	default:
		return nil, ""
	}
	v := s.With.Get(key)
	if v == nil || v.Kind != Scalar {
		return nil, ""
	}
	text := v.Text
	if HasExpr(text) {
		t, err := ParseTemplate(text)
		if err != nil {
			return nil, ""
		}
		text = t.Render(func(r Ref) (string, bool) {
			if r.NS == NSVars {
				return c.p.Var(r.Name)
			}
			return "", false
		}, nil)
	}
	if !strings.HasPrefix(text, "s3://") {
		return nil, ""
	}
	return v, key
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

// expressions checks every ${{ }} under with:, forbids them elsewhere, and
// lints literals that look like secrets.
func (c *checker) expressions() {
	steps := c.p.AllSteps()
	withs := make(map[*Value]*Step, len(steps))
	var withKinds [Map + 1]bool // the kinds of value a with: is: only those are looked up
	for _, s := range steps {
		if s.With != nil {
			withs[s.With] = s
			withKinds[s.With.Kind] = true
		}
	}
	// A value reached twice (through an alias) is checked once; without
	// aliases, none is.
	var visited map[*Value]bool
	if c.p.Root.shared {
		visited = map[*Value]bool{}
	}
	var walk func(v *Value, step *Step)
	walk = func(v *Value, step *Step) {
		if withKinds[v.Kind] {
			if s, ok := withs[v]; ok {
				step = s
			}
		}
		switch v.Kind {
		case Scalar:
			if v.Tag != "!!str" {
				return
			}
			if visited != nil {
				if visited[v] {
					return
				}
				visited[v] = true
			}
			c.controls(v)
			c.lintSecret(v)
			if step != nil {
				c.typos(v, step)
			}
			if !HasExpr(v.Text) {
				return
			}
			if step == nil {
				c.d.errorf(v.Pos, "expressions are only expanded in with: values; %q here would stay literal", clip(v.Text))
				return
			}
			c.template(v, step)
		case List:
			for _, it := range v.Items {
				walk(it, step)
			}
		case Map:
			for _, f := range v.Fields {
				c.keyControls(f)
				walk(f.Value, step)
			}
		}
	}
	walk(c.p.Root, nil)
}

func (c *checker) lintSecret(v *Value) {
	for _, f := range secret.Lint(v.Text) {
		c.d.errorf(c.offsetPos(v, f.Offset), "%s", f.Message)
	}
}

// offsetPos is the position of byte offset off inside scalar v: exact for
// single-line scalars and for the lines of a multi-line scalar found as
// written in the source (block scalars, plain or quoted lines without
// escapes); the scalar's own position otherwise.
func (c *checker) offsetPos(v *Value, off int) Pos {
	p := v.Pos
	if off > len(v.Text) || off < 0 {
		return p
	}
	if c.lines == nil {
		c.lines = bytes.Split(c.p.source, []byte("\n"))
	}
	if p.Line < 1 || p.Line > len(c.lines) {
		return p
	}
	line := []rune(string(c.lines[p.Line-1]))
	col := p.Col - 1
	if col >= len(line) {
		return p
	}
	block := line[col] == '|' || line[col] == '>'
	start := col
	if line[col] == '"' || line[col] == '\'' {
		start++ // quoted scalars start one column after their quote
	}
	if !block && strings.HasPrefix(string(line[start:]), v.Text[:off]) {
		p.Col = start + 1 + utf8.RuneCountInString(v.Text[:off])
		return p
	}
	// A block scalar, a scalar over several lines, or escapes before off.
	if q, ok := c.multilinePos(v, off, line[col]); ok {
		return q
	}
	if !block && !strings.ContainsRune(v.Text, '\n') {
		p.Col = start + 1 + utf8.RuneCountInString(v.Text[:off]) // about there
	}
	return p
}

// multilinePos finds the source line that holds byte off of a multi-line
// scalar by looking for each source line's text in the value, in order.
func (c *checker) multilinePos(v *Value, off int, first rune) (Pos, bool) {
	start := v.Pos.Line // the first source line holding text
	firstCol := v.Pos.Col - 1
	switch first {
	case '|', '>':
		start, firstCol = v.Pos.Line+1, -1
	case '"', '\'':
		firstCol++
	}
	cursor := 0
	for ln := start; ln <= len(c.lines) && cursor < len(v.Text); ln++ {
		raw := string(c.lines[ln-1])
		raw = strings.TrimSuffix(raw, "\r")
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		if ln == v.Pos.Line && firstCol >= 0 {
			indent = len(string([]rune(raw)[:min(firstCol, len([]rune(raw)))]))
		}
		text := strings.TrimRight(raw[indent:], " \t")
		if text == "" {
			continue
		}
		i := strings.Index(v.Text[cursor:], text)
		if i < 0 {
			// The line is not in the value as written (an escape, a
			// closing quote): give up on exact positions after it.
			if t := strings.TrimRight(text, "\"'"); t != "" && strings.HasPrefix(v.Text[cursor:], strings.TrimLeft(t, " ")) {
				i = 0
				text = t
			} else {
				break
			}
		}
		lo, hi := cursor+i, cursor+i+len(text)
		if off >= lo && off < hi {
			return Pos{File: v.Pos.File, Line: ln, Col: utf8.RuneCountInString(raw[:indent]) + 1 + utf8.RuneCountInString(v.Text[lo:off])}, true
		}
		cursor = hi
	}
	return v.Pos, false
}

func (c *checker) template(v *Value, s *Step) {
	t, err := ParseTemplate(v.Text)
	var e *ExprError
	if errors.As(err, &e) {
		c.d.errorf(c.offsetPos(v, e.Offset), "%s", e.Msg)
		return
	}
	root := c.p.MatrixRoot(s)
	for _, r := range t.Refs() {
		pos := func() Pos { return c.offsetPos(v, r.Offset) } // only for a problem: it costs
		switch r.NS {
		case NSVars:
			if _, ok := c.p.Var(r.Name); !ok {
				var known []string
				for _, vv := range c.p.Vars {
					known = append(known, vv.Name)
				}
				c.d.errorf(pos(), "unknown var %q%s", r.Name, c.suggest(r.Name, known))
			}
		case NSMatrix:
			if root == nil {
				c.d.errorf(pos(), "${{ matrix.%s }} is used in step %q, which has no matrix", r.Name, s.ID)
				continue
			}
			var keys []string
			for _, a := range root.Matrix.Axes {
				keys = append(keys, a.Name)
			}
			if !slices.Contains(keys, r.Name) {
				c.d.errorf(pos(), "unknown matrix key %q%s", r.Name, c.suggest(r.Name, keys))
			}
		case NSCell:
			if root == nil {
				c.d.errorf(pos(), "${{ cell.%s }} is used in step %q, which has no matrix", r.Name, s.ID)
			} else if r.Name != "id" && r.Name != "index" {
				c.d.errorf(pos(), "unknown cell field %q (cell.id and cell.index exist)", r.Name)
			}
		case NSSlot:
			if root == nil {
				c.d.errorf(pos(), "${{ slot.%s }} is used in step %q, which has no matrix (only the cells of a matrix hold slots)", r.Name, s.ID)
			} else if r.Name != "index" && r.Name != "gpus" {
				c.d.errorf(pos(), "unknown slot field %q (slot.index and slot.gpus exist)", r.Name)
			}
		case NSRun:
			if r.Name != "id" {
				c.d.errorf(pos(), "unknown run field %q (run.id exists)", r.Name)
			}
		case NSInstance:
			if r.Name != "name" {
				c.d.errorf(pos(), "unknown instance field %q (instance.name exists)", r.Name)
			}
		case NSPlan:
			if r.Name != "dir" {
				c.d.errorf(pos(), "unknown plan field %q (plan.dir exists)", r.Name)
			}
		case NSSecrets:
			c.d.errorf(pos(), "secrets are never interpolated into commands: list %s under this step's with.env and read it as $%s in the command", r.Name, r.Name)
		default:
			c.d.errorf(pos(), "unknown namespace %q in ${{ %s }} (use vars, matrix, cell, slot, run, instance or plan)", r.NS, r)
		}
	}
}

// commands checks each run step's command as shell: every ${{ }} must
// stand where the shell reads its value as one word (plan/shell.go), and a
// container's command must be nothing but words (CheckContainerArgv).
// maxShellProblems is how many refused expressions of one command are
// reported, each at its position.
const maxShellProblems = 20

func (c *checker) commands() {
	for _, s := range c.p.AllSteps() {
		if s.Uses != KindRun {
			continue
		}
		v := s.With.Get("command")
		if !v.IsString() {
			continue
		}
		t, err := ParseTemplate(v.Text)
		if err != nil {
			continue // reported by template
		}
		refs := t.Refs()
		problems := checkShellPlacement(v.Text, refs)
		if s.With.Get("image") != nil {
			masked, _ := maskExprs(v.Text, refs)
			if p := argvProblem(masked); p != nil {
				problems = append(problems, *p)
			}
		}
		for i, p := range problems {
			if i == maxShellProblems {
				// Each position costs a look at the text: a command of
				// thousands of refused expressions is reported in part.
				c.d.errorf(v.Pos, "and %d more expressions of this command are refused as the ones above", len(problems)-i)
				break
			}
			if p.Warning {
				c.d.warnf(c.offsetPos(v, p.Offset), "%s", p.Msg)
			} else {
				c.d.errorf(c.offsetPos(v, p.Offset), "%s", p.Msg)
			}
		}
	}
}

// waitWhereRun checks that a per-instance wait step runs only on instances
// where the run steps it needs launch jobs: a wait@i for a run that is not
// on i would look for jobs i never had.
func (c *checker) waitWhereRun(s *Step) {
	if s.Matrix != nil {
		return // cells are waited for where they were placed
	}
	on := c.p.Pool(s)
	for _, n := range s.Needs {
		t := c.p.Step(n.Name)
		if t == nil || t.Uses != KindRun || t.Matrix != nil {
			continue
		}
		runOn := c.p.Pool(t)
		var extra []string
		for _, i := range on {
			if !slices.Contains(runOn, i) {
				extra = append(extra, i)
			}
		}
		if len(extra) > 0 && len(runOn) > 0 {
			c.d.errorf(s.IDPos, "wait step %q runs on %s, where run step %q launches no job (it runs on %s): give it on: [%s]",
				s.ID, strings.Join(extra, ", "), t.ID, strings.Join(runOn, ", "), strings.Join(runOn, ", "))
		}
	}
}

// runWithoutWait warns about run steps no wait step follows.
func (c *checker) runWithoutWait() {
	waited := map[string]bool{}
	for _, s := range c.p.AllSteps() {
		if s.Uses == KindWait {
			for _, n := range s.Needs {
				waited[n.Name] = true
			}
		}
	}
	unwaited := map[*Step]bool{} // run steps a results step reads without a wait (errors)
	for _, u := range c.p.AllSteps() {
		if !SavesResults(u.Uses) {
			continue
		}
		before := c.ancestors(u)
		for r := range before {
			if r.Uses != KindRun || r.ID == "" {
				continue
			}
			// A run it reads: one it needs itself, or one that declares
			// results (a run further up without results, such as a
			// service left running, is the warning's business).
			direct := slices.ContainsFunc(u.Needs, func(n Name) bool { return n.Name == r.ID })
			if !direct && r.With.Get("results") == nil {
				continue
			}
			if slices.ContainsFunc(c.p.AllSteps(), func(w *Step) bool {
				return w.Uses == KindWait && before[w] && slices.ContainsFunc(w.Needs, func(n Name) bool { return n.Name == r.ID })
			}) {
				continue
			}
			unwaited[r] = true
			c.d.errorf(u.IDPos, "%s step %q copies results of run step %q, but no wait step for %q comes before it: it would start while the jobs still run, copy nothing or half, and teardown would then kill them; add a wait step (uses: wait, needs: [%s]) and make %q need it", u.Uses, u.ID, r.ID, r.ID, r.ID, u.ID)
		}
	}
	for _, s := range c.p.AllSteps() {
		if s.Uses == KindRun && s.ID != "" && !waited[s.ID] && !unwaited[s] {
			c.d.warnf(s.IDPos, "run step %q has no wait step after it: its jobs are launched and nobody waits for them (add a wait step that needs %s)", s.ID, s.ID)
		}
	}
}

// waitPerCell checks that a wait for a per-cell run step waits per cell
// (matrix: inherit): a wait once per instance follows every job there as
// one node, so a cell whose job failed would be reported by no cell, and
// the cells' results steps would start before their own jobs ended.
func (c *checker) waitPerCell(s *Step) {
	for _, n := range s.Needs {
		t := c.p.Step(n.Name)
		if t == nil || t.Uses != KindRun {
			continue
		}
		root := c.p.MatrixRoot(t)
		if root == nil || c.p.MatrixRoot(s) == root {
			continue
		}
		pos := s.IDPos
		if s.Matrix != nil {
			pos = s.Matrix.Pos
		}
		c.d.errorf(pos, "wait step %q waits for run step %q, which launches one job per cell, but it is not per cell: give it matrix: inherit, so each cell's wait follows its own job (and a failed job fails its cell)", s.ID, t.ID)
	}
}

// uploadAfterDelete finds upload-s3 and fetch steps ordered after a
// delete of one of their instances: the results would be gone.
func (c *checker) uploadAfterDelete() {
	for _, u := range c.p.AllSteps() {
		if !SavesResults(u.Uses) {
			continue
		}
		before := c.ancestors(u)
		for _, d := range c.p.AllSteps() {
			if d.Uses != KindDelete {
				continue
			}
			if !before[d] && !(u.Finally && !d.Finally) {
				continue
			}
			if shared := intersect(c.p.Pool(u), c.p.Pool(d)); len(shared) > 0 {
				c.d.errorf(u.IDPos, "%s step %q runs after delete step %q on %s: the results would already be gone; order the delete after the %s", u.Uses, u.ID, d.ID, strings.Join(shared, ", "), strings.TrimSuffix(u.Uses, "-s3"))
			}
		}
	}
}

func (c *checker) ancestors(s *Step) map[*Step]bool {
	out := map[*Step]bool{}
	stack := []*Step{s}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range cur.Needs {
			if t := c.p.Step(n.Name); t != nil && !out[t] {
				out[t] = true
				stack = append(stack, t)
			}
		}
	}
	return out
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
