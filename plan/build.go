package plan

import (
	"strconv"
	"strings"
	"time"
)

// build turns a tree into the model, leniently: elements of the wrong shape
// were already reported by the schema and are skipped here.
func build(file string, root *Value) *Plan {
	p := &Plan{File: file, Root: root, Platform: Platform{Kind: PlatformLocal, Pos: root.Pos}}
	if v := root.Get("taoflow"); v != nil && v.Kind == Scalar {
		p.Version, _ = strconv.Atoi(v.Text)
	}
	if v := root.Get("name"); v != nil && v.Kind == Scalar {
		p.Name, p.NamePos = v.Text, v.Pos
	}
	if v := root.Get("description"); v != nil && v.Kind == Scalar {
		p.Description = v.Text
	}
	if f := root.Field("platform"); f != nil {
		buildPlatform(&p.Platform, f)
	}
	if v := root.Get("vars"); v != nil {
		for _, f := range v.Fields {
			if f.Value.Kind == Scalar {
				p.Vars = append(p.Vars, Var{Name: f.Key, Value: f.Value.Text, Pos: f.KeyPos, From: "vars: line " + strconv.Itoa(f.KeyPos.Line)})
			}
		}
	}
	p.Secrets = names(root.Get("secrets"))
	if v := root.Get("instances"); v != nil {
		for _, f := range v.Fields {
			p.Instances = append(p.Instances, buildInstance(f))
		}
	}
	if v := root.Get("steps"); v != nil {
		for i, it := range v.Items {
			if it.Kind == Map {
				s := buildStep(it, false)
				s.pointer = "/steps/" + strconv.Itoa(i)
				p.Steps = append(p.Steps, s)
			}
		}
	}
	if v := root.Get("finally"); v != nil {
		for i, it := range v.Items {
			if it.Kind == Map {
				s := buildStep(it, true)
				s.pointer = "/finally/" + strconv.Itoa(i)
				p.Finally = append(p.Finally, s)
			}
		}
	}
	if v := root.Get("fail_fast"); v != nil {
		p.FailFast = v.Text == "true"
	}
	if v := root.Get("salvage"); v != nil {
		p.NoSalvage = v.Text == "false"
	}
	if v := root.Get("provenance"); v != nil {
		p.Provenance = v.Text
	}
	if f := root.Field("budget"); f != nil {
		p.Budget.Pos = f.KeyPos
		p.Budget.MaxCost = floatOf(f.Value.Get("max_cost"))
		p.Budget.MaxDuration, _ = time.ParseDuration(scalar(f.Value.Get("max_duration")))
		p.Budget.AllowUnpriced = scalar(f.Value.Get("unpriced")) == "allow"
	}
	buildRecords(p, root)
	buildAutostop(p, root)
	p.index()
	return p
}

func buildPlatform(pl *Platform, f *Field) {
	pl.Pos = f.KeyPos
	v := f.Value
	switch v.Kind {
	case Scalar:
		pl.Kind = v.Text
		pl.Pos = v.Pos
	case Map:
		if k := v.Get("kind"); k != nil {
			pl.Kind, pl.Pos = k.Text, k.Pos
		}
		pl.Binary = scalar(v.Get("binary"))
		pl.Transport = scalar(v.Get("transport"))
		pl.SSHConfig = scalar(v.Get("ssh_config"))
		pl.ConnectTimeout, _ = time.ParseDuration(scalar(v.Get("connect_timeout")))
		pl.MaxSessions, _ = intOf(v.Get("max_sessions"))
		pl.InstanceEnv = names(v.Get("instance_env"))
	}
	if pl.Transport == "" {
		pl.Transport = "ssh"
	}
	if pl.MaxSessions == 0 {
		pl.MaxSessions = 8
	}
}

func buildInstance(f Field) *Instance {
	in := &Instance{Name: f.Key, Pos: f.KeyPos, Slots: 1}
	v := f.Value
	if c := v.Get("create"); c != nil {
		in.Create = true
		in.CreateType = scalar(c.Get("type"))
		in.Select = Select{
			GPU:       scalar(c.Get("gpu")),
			MinVRAM:   floatOf(c.Get("min_vram")),
			MinDisk:   floatOf(c.Get("min_disk")),
			MaxPrice:  floatOf(c.Get("max_price")),
			Stoppable: scalar(c.Get("stoppable")) == "true",
			Provider:  scalar(c.Get("provider")),
		}
		in.Select.GPUs, _ = intOf(c.Get("gpus"))
	}
	in.Existing = scalar(v.Get("existing"))
	in.Host = scalar(v.Get("host"))
	if s, ok := intOf(v.Get("slots")); ok && s > 0 {
		in.Slots, in.SlotsPos = s, v.Field("slots").KeyPos
	}
	if g, ok := intOf(v.Get("gpus")); ok && g > 0 {
		in.GPUs, in.GPUsPos = g, v.Field("gpus").KeyPos
	}
	in.Keep = scalar(v.Get("keep")) == "true"
	return in
}

func buildStep(v *Value, final bool) *Step {
	s := &Step{Pos: v.Pos, Finally: final, Retries: 0, Backoff: DefaultBackoff}
	if f := v.Field("id"); f != nil && f.Value.Kind == Scalar {
		s.ID, s.IDPos = f.Value.Text, f.Value.Pos
	} else {
		s.IDPos = v.Pos
	}
	if u := v.Get("uses"); u != nil && u.Kind == Scalar {
		s.Uses, s.UsesPos = u.Text, u.Pos
	}
	s.Name = scalar(v.Get("name"))
	s.Needs = names(v.Get("needs"))
	if on := v.Get("on"); on != nil {
		s.On = names(on)
		if s.On == nil {
			s.On = []Name{}
		}
		for _, n := range s.On {
			if n.Name == "all" {
				s.OnAll = true
			}
		}
	}
	if m := v.Field("matrix"); m != nil {
		s.Matrix = &Matrix{Pos: m.KeyPos}
		switch m.Value.Kind {
		case Scalar:
			s.Matrix.Inherit = m.Value.Text == "inherit"
		case Map:
			for _, ax := range m.Value.Fields {
				a := Axis{Name: ax.Key, Pos: ax.KeyPos}
				for _, it := range ax.Value.Items {
					if it.Kind == Scalar {
						a.Values = append(a.Values, it.Text)
					}
				}
				s.Matrix.Axes = append(s.Matrix.Axes, a)
			}
		}
	}
	s.Timeout, _ = time.ParseDuration(scalar(v.Get("timeout")))
	if r := v.Get("retries"); r != nil {
		switch r.Kind {
		case Scalar:
			s.Retries, _ = intOf(r)
		case Map:
			s.Retries, _ = intOf(r.Get("max"))
			if b, err := time.ParseDuration(scalar(r.Get("backoff"))); err == nil {
				s.Backoff = b
			}
		}
	}
	s.ContinueOnError = scalar(v.Get("continue_on_error")) == "true"
	s.MaxParallel, _ = intOf(v.Get("max_parallel"))
	if w := v.Get("with"); w != nil && w.Kind == Map {
		s.With = w
	}
	return s
}

// names reads a string or a list of strings.
func names(v *Value) []Name {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case Scalar:
		return []Name{{Name: v.Text, Pos: v.Pos}}
	case List:
		out := []Name{}
		for _, it := range v.Items {
			if it.Kind == Scalar {
				out = append(out, Name{Name: it.Text, Pos: it.Pos})
			}
		}
		return out
	}
	return nil
}

func scalar(v *Value) string {
	if v == nil || v.Kind != Scalar {
		return ""
	}
	return v.Text
}

// floatOf reads a number; 0 for anything else, which the schema reports.
func floatOf(v *Value) float64 {
	if v == nil || v.Kind != Scalar {
		return 0
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.Text, "_", ""), 64)
	if err != nil || f < 0 {
		return 0
	}
	return f
}

// intOf reads an integer as YAML writes it (digits, _ separators, 0x/0o/0b)
// when it fits an int; false for anything else, which check reports.
func intOf(v *Value) (int, bool) {
	if v == nil || v.Kind != Scalar {
		return 0, false
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(v.Text, "_", ""), 0, strconv.IntSize)
	if err != nil {
		return 0, false
	}
	return int(i), true
}
