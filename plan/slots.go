package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// PerSlot is the with.gpus value of a run step that gives each running cell
// the GPUs of the slot it holds.
const PerSlot = "per-slot"

// SlotGPUs returns the GPUs of slot index of an instance with gpus GPUs
// and slots slots: the GPUs split evenly, slot i getting devices
// i*k … i*k+k-1 where k = gpus/slots (GPUs left over by an uneven split
// are given to no slot). It returns nil when a slot would get none (more
// slots than GPUs, or an unknown count of 0) or index is out of range.
func SlotGPUs(gpus, slots, index int) []int {
	if slots < 1 || index < 0 || index >= slots || gpus < slots {
		return nil
	}
	k := gpus / slots
	out := make([]int, k)
	for i := range out {
		out[i] = index*k + i
	}
	return out
}

// DeviceList writes GPU indices as docker and CUDA_VISIBLE_DEVICES take
// them: "0,1".
func DeviceList(gpus []int) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}

// PerSlot reports whether s is a run step with gpus: per-slot.
func (s *Step) PerSlot() bool {
	return s.Uses == KindRun && scalar(s.With.Get("gpus")) == PerSlot
}

// UsesSlotGPUs reports whether the step needs the GPUs of its cell's
// slot: it splits them (gpus: per-slot) or names ${{ slot.gpus }}.
func (s *Step) UsesSlotGPUs() bool {
	return s.PerSlot() || refersTo(s.With, NSSlot, "gpus")
}

// CountsGPUs reports whether a preflight step on instance inst must count
// its GPUs: a step that needs the GPUs of its slots runs cells there, and
// the instance does not declare how many it has.
func (p *Plan) CountsGPUs(inst string) bool {
	in := p.Instance(inst)
	if in == nil || in.GPUs > 0 {
		return false
	}
	for _, s := range p.slotGPUSteps() {
		for _, name := range p.Pool(s) {
			if name == inst {
				return true
			}
		}
	}
	return false
}

// NeedsGPUs returns how many GPUs a preflight step must find on inst for
// the plan's per-slot steps: the declared count, or one per slot when it
// is counted; 0 when no such step runs there.
func (p *Plan) NeedsGPUs(inst string) int {
	in := p.Instance(inst)
	if in == nil {
		return 0
	}
	for _, s := range p.slotGPUSteps() {
		for _, name := range p.Pool(s) {
			if name == inst {
				return max(in.GPUs, in.Slots)
			}
		}
	}
	return 0
}

// slotGPUSteps returns the matrix roots whose cells need their slot's
// GPUs (the root's pool is where the cells run).
func (p *Plan) slotGPUSteps() []*Step {
	var out []*Step
	for _, s := range p.AllSteps() {
		if !s.UsesSlotGPUs() {
			continue
		}
		if root := p.MatrixRoot(s); root != nil {
			out = append(out, root)
		}
	}
	return out
}

// refersTo reports whether a string under v holds ${{ ns.name }}.
func refersTo(v *Value, ns, name string) bool {
	if v == nil {
		return false
	}
	switch v.Kind {
	case Scalar:
		if !v.IsString() || !HasExpr(v.Text) || !strings.Contains(v.Text, name) {
			return false // a reference spells its name out
		}
		t, err := ParseTemplate(v.Text)
		if err != nil {
			return false
		}
		for _, r := range t.Refs() {
			if r.NS == ns && r.Name == name {
				return true
			}
		}
	case List:
		for _, it := range v.Items {
			if refersTo(it, ns, name) {
				return true
			}
		}
	case Map:
		for _, f := range v.Fields {
			if refersTo(f.Value, ns, name) {
				return true
			}
		}
	}
	return false
}

// slots checks the steps that split GPUs over slots: they need a matrix
// (cells are what hold slots), at least one GPU per slot where the count is
// declared, and a preflight step upstream to count them where it is not.
func (c *checker) slots() {
	for _, s := range c.p.AllSteps() {
		if !s.UsesSlotGPUs() {
			continue
		}
		at := s.UsesPos
		what := "${{ slot.gpus }}"
		if s.PerSlot() {
			at, what = s.With.Get("gpus").Pos, "gpus: per-slot"
		}
		root := c.p.MatrixRoot(s)
		if root == nil {
			if s.PerSlot() { // slot.* outside a matrix is reported by template
				c.d.errorf(at, "%s needs a matrix: the cells of a matrix are what hold an instance's slots; add a matrix to step %q, or give its job GPUs with gpus: all or device=N", what, s.ID)
			}
			continue
		}
		for _, name := range c.p.Pool(root) {
			in := c.p.Instance(name)
			switch {
			case in.GPUs > 0 && in.GPUs < in.Slots:
				c.d.errorf(at, "%s in step %q: instance %q has %d slots (line %d) but %s (line %d), so a slot would get no GPU; set its slots to at most %d",
					what, s.ID, name, in.Slots, in.SlotsPos.Line, counted(in.GPUs, "GPU"), in.GPUsPos.Line, in.GPUs)
			case in.GPUs%in.Slots != 0 && s.PerSlot():
				k := in.GPUs / in.Slots
				c.d.warnf(at, "gpus: per-slot in step %q: instance %q has %s (line %d) for %d slots (line %d): each slot gets %s and %s no slot",
					s.ID, name, counted(in.GPUs, "GPU"), in.GPUsPos.Line, in.Slots, in.SlotsPos.Line, counted(k, "GPU"), idle(in.Slots*k, in.GPUs))
			case in.GPUs == 0 && !c.preflightBefore(s, name):
				c.d.errorf(at, "%s in step %q: the GPUs of instance %q are not known before it runs; declare them (instances.%s.gpus: N), or run a preflight step on %s that step %q needs, which counts them",
					what, s.ID, name, name, name, s.ID)
			}
		}
	}
}

// preflightBefore reports whether a preflight step on inst is upstream of
// s (through needs, transitively).
func (c *checker) preflightBefore(s *Step, inst string) bool {
	seen := map[*Step]bool{}
	var walk func(t *Step) bool
	walk = func(t *Step) bool {
		for _, n := range t.Needs {
			u := c.p.Step(n.Name)
			if u == nil || seen[u] {
				continue
			}
			seen[u] = true
			if u.Uses == KindPreflight {
				for _, p := range c.p.Pool(u) {
					if p == inst {
						return true
					}
				}
			}
			if walk(u) {
				return true
			}
		}
		return false
	}
	return walk(s)
}

// idle names the GPUs from..to-1 that no slot gets: "GPU 2 is given to",
// "GPUs 4-5 are given to".
func idle(from, to int) string {
	if to-from == 1 {
		return fmt.Sprintf("GPU %d is given to", from)
	}
	return fmt.Sprintf("GPUs %d-%d are given to", from, to-1)
}

func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
