package plan

import (
	"strings"
	"time"
)

// Autostop is an instance's autostop: what it does when taoflow stops
// renewing its lease (docs/design.md §8.8).
type Autostop struct {
	Pos Pos // the autostop: key that set it (the instance's, else the plan's)
	// After is how long after the last lease renewal the instance stops
	// itself once none of the run's jobs runs there.
	After time.Duration
	// MaxAfter, when not zero, is how long after the last renewal it stops
	// itself even while a job runs.
	MaxAfter time.Duration
	// Command is the command: as written; "" takes the platform's default
	// (AutostopCommand).
	Command string
}

// DefaultAutostopCommand is the command an autostop runs on a brev
// instance the run creates when command: is not given.
const DefaultAutostopCommand = "sudo shutdown -h now"

// AutostopCommand returns the command in's watchdog runs on platform kind:
// command: when given, else DefaultAutostopCommand on a brev instance the
// run creates, else "": autostop never touches a machine the run did not
// create (an ssh host, an existing: instance) nor a local sandbox unless
// command: says how. It is "" too when in has no autostop.
func (in *Instance) AutostopCommand(kind string) string {
	switch {
	case in.Autostop == nil:
		return ""
	case in.Autostop.Command != "":
		return in.Autostop.Command
	case kind == PlatformBrev && in.Create:
		return DefaultAutostopCommand
	}
	return ""
}

// buildAutostop reads the plan-level autostop: and each instance's,
// which replaces the plan's key by key (autostop: false turns it off).
func buildAutostop(p *Plan, root *Value) {
	if f := root.Field("autostop"); f != nil && f.Value.Kind == Map {
		p.Autostop = readAutostop(nil, f)
	}
	insts := root.Get("instances")
	for _, in := range p.Instances {
		var f *Field
		if v := insts.Get(in.Name); v != nil {
			f = v.Field("autostop")
		}
		switch {
		case f == nil:
			if p.Autostop != nil {
				a := *p.Autostop
				in.Autostop = &a
			}
		case f.Value.Kind == Map:
			in.Autostop = readAutostop(p.Autostop, f)
		}
	}
}

func readAutostop(base *Autostop, f *Field) *Autostop {
	a := &Autostop{}
	if base != nil {
		*a = *base
	}
	a.Pos = f.KeyPos
	v := f.Value
	if d, err := time.ParseDuration(scalar(v.Get("after"))); err == nil {
		a.After = d
	}
	if d, err := time.ParseDuration(scalar(v.Get("max_after"))); err == nil {
		a.MaxAfter = d
	}
	if c := scalar(v.Get("command")); c != "" {
		a.Command = c
	}
	return a
}

// autostop checks the autostop: settings: each duration written, then
// each instance's merged settings (once per autostop: key).
func (c *checker) autostop() {
	reported := map[Pos]bool{}
	for _, f := range c.autostopFields() {
		for _, key := range []string{"after", "max_after"} {
			d := f.Value.Get(key)
			if d == nil {
				continue
			}
			if !d.IsString() || !durationRE.MatchString(d.Text) {
				reported[f.KeyPos] = true // the schema reports other shapes
				continue
			}
			t, err := time.ParseDuration(d.Text)
			switch {
			case err != nil:
				c.d.errorf(d.Pos, "autostop.%s: %s is out of range; a duration is at most 2562047h (about 292 years)", key, clip(d.Text))
			case t <= 0:
				c.d.errorf(d.Pos, "autostop.%s: %s is not a positive duration; give one such as 30m (or 5s in a test)", key, clip(d.Text))
			default:
				continue
			}
			reported[f.KeyPos] = true
		}
	}
	for _, in := range c.p.Instances {
		a := in.Autostop
		if a == nil || reported[a.Pos] {
			continue
		}
		switch {
		case a.After <= 0:
			c.d.errorf(a.Pos, "instance %q: autostop needs after: a positive duration, such as after: 30m (here or in the plan-level autostop)", in.Name)
		case a.MaxAfter != 0 && a.MaxAfter < a.After:
			c.d.errorf(a.Pos, "instance %q: autostop max_after (%s) is shorter than after (%s): give max_after at least %s", in.Name, ShortDuration(a.MaxAfter), ShortDuration(a.After), ShortDuration(a.After))
		default:
			continue
		}
		reported[a.Pos] = true
	}
}

// autostopFields returns the autostop: mappings written in the plan.
func (c *checker) autostopFields() []*Field {
	var out []*Field
	if f := c.p.Root.Field("autostop"); f != nil && f.Value.Kind == Map {
		out = append(out, f)
	}
	if insts := c.p.Root.Get("instances"); insts != nil {
		for _, in := range insts.Fields {
			if f := in.Value.Field("autostop"); f != nil && f.Value.Kind == Map {
				out = append(out, f)
			}
		}
	}
	return out
}

// autostopInert warns of an autostop that does nothing: on a machine the
// run did not create, or a local sandbox, without command:.
func (c *checker) autostopInert() {
	kind := c.p.Platform.Kind
	for _, in := range c.p.Instances {
		if in.Autostop == nil || in.AutostopCommand(kind) != "" {
			continue
		}
		what := "a local sandbox"
		switch {
		case kind == PlatformSSH:
			what = "an ssh host"
		case in.Existing != "":
			what = "an existing: brev instance"
		}
		c.d.warnf(in.Autostop.Pos, "instance %q is %s: its autostop does nothing, because autostop never touches a machine it didn't create unless command: is given; give autostop: {command: ...} to say how it stops", in.Name, what)
	}
}

// ShortDuration writes d as a person would: 30m, 1h30m, 24h, 90s, 1.5s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Describe says when the instance stops itself: "30m after taoflow
// leaves", with ", 24h at most with a job running" when max_after is set.
func (a *Autostop) Describe() string {
	s := ShortDuration(a.After) + " after taoflow leaves"
	if a.MaxAfter > 0 {
		s += ", " + ShortDuration(a.MaxAfter) + " at most with a job running"
	}
	return s
}
