package steps

import (
	"fmt"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// Slot is the slot of its instance that a node's cell holds (a cell holds
// one from its placement until its last node ends, and no other running
// cell holds it meanwhile), with the slot's share of the instance's GPUs.
type Slot struct {
	Index int
	GPUs  []int // nil when the instance's GPU count is not known
}

// RecordGPUs is the node fact in which preflight records the GPUs it
// counted on its instance (a resumed run reads it back: RememberGPUs).
const RecordGPUs = "gpus"

// GPUs returns the GPU count of an instance for gpus: per-slot: what the
// plan declares, else what its preflight counted in this run, else 0.
func (s *Steps) GPUs(instance string) int {
	if s.cfg.Plan != nil {
		if in := s.cfg.Plan.Instance(instance); in != nil && in.GPUs > 0 {
			return in.GPUs
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gpus[instance]
}

// RememberGPUs tells the steps the GPU count an earlier attempt of the run
// counted on instance (resume).
func (s *Steps) RememberGPUs(instance string, n int) {
	s.noteGPUs(platform.Instance{Name: instance}, n)
}

func (s *Steps) noteGPUs(inst platform.Instance, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gpus == nil {
		s.gpus = map[string]int{}
	}
	s.gpus[inst.Name] = n
}

// slotDevices applies gpus: per-slot to a job: a container gets the slot's
// GPUs as docker run --gpus device=…, a host process as
// CUDA_VISIBLE_DEVICES exported before its command (so cmd.sh shows it).
func slotDevices(req Request, spec *jobSpec) error {
	if spec.GPUs != plan.PerSlot {
		return nil
	}
	if req.Slot == nil || len(req.Slot.GPUs) == 0 {
		return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("gpus: per-slot: node %s holds no slot with GPUs on %s (its GPU count is not known, or below its slots)", req.NodeID, req.Instance.Name)}
	}
	devices := plan.DeviceList(req.Slot.GPUs)
	if spec.Image != "" {
		spec.GPUs = "device=" + devices
		return nil
	}
	spec.GPUs = ""
	spec.Command = "CUDA_VISIBLE_DEVICES=" + devices + "; export CUDA_VISIBLE_DEVICES\n" + spec.Command
	return nil
}

// preflightGPUs is how many GPUs a preflight must find on the request's
// instance, and whether it counts them at all: with.gpus, and for
// gpus: per-slot the declared count or one per slot (plan.NeedsGPUs).
func (s *Steps) preflightGPUs(req Request, withGPUs int) (want int, count bool, why string) {
	want = withGPUs
	if s.cfg.Plan == nil {
		return want, want > 0, ""
	}
	need := s.cfg.Plan.NeedsGPUs(req.Instance.Name)
	if need > want {
		in := s.cfg.Plan.Instance(req.Instance.Name)
		want = need
		if in.GPUs > 0 {
			why = fmt.Sprintf(" (instances.%s.gpus: %d, for gpus: per-slot)", in.Name, in.GPUs)
		} else {
			why = fmt.Sprintf(" (gpus: per-slot gives each of its %s a GPU)", counted(in.Slots, "slot"))
		}
	}
	return want, want > 0 || s.cfg.Plan.CountsGPUs(req.Instance.Name), why
}
