package steps

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/plan"
)

// slurmPreflight checks a pool against what the cluster says, before
// anything of the run is queued (docs/design.md §6.3): its partition
// exists, its time limit is within the partition's MaxTime, a node of the
// partition has its GPUs, sbatch --test-only takes a job of its shape
// (account, QOS), and srun has pyxis where the plan runs containers.
func (s *Steps) slurmPreflight(ctx context.Context, req Request) error {
	pool := s.slurm.(*slurmRT).pool(req.Instance)
	containers := s.cfg.Plan != nil && s.cfg.Plan.RunsContainers()
	res, err := s.exec(ctx, req.Instance, s.slurmPreflightScript(req), nil)
	if err != nil {
		return s.fail(ClassNotReachable, err, "asking Slurm about pool %s: %v", pool.Name, err)
	}
	if res.ExitCode != 0 {
		return s.fail(ClassNotReachable, nil, "asking Slurm about pool %s: %s (is Slurm's client installed and the cluster up?)", pool.Name, s.lastLine(append(res.Stdout, res.Stderr...)))
	}
	facts := parseSlurmPreflight(string(res.Stdout))
	if err := checkPool(pool, facts, containers); err != nil {
		return s.fail(ClassInvalidConfig, nil, "%s", err)
	}
	part := pool.Pool.Partition
	if part == "" {
		part = facts.defaultPartition
	}
	fmt.Fprintf(req.Log, "pool %s: partition %s (MaxTime %s), GPUs per node up to %d; sbatch --test-only: %s\n",
		pool.Name, part, facts.partitions[part].maxTime, facts.gpus[part], s.redact.Clip(facts.test, 200))
	return nil
}

// slurmPreflightScript asks the cluster about req's pool
// (scripts/slurm-preflight.sh).
func (s *Steps) slurmPreflightScript(req Request) string {
	pool := s.slurm.(*slurmRT).pool(req.Instance)
	containers := s.cfg.Plan != nil && s.cfg.Plan.RunsContainers()
	args := slices.DeleteFunc(SbatchArgs(s.cfg.RunID, "tf-preflight", pool), func(a string) bool {
		return a == "--parsable" || strings.HasPrefix(a, "--open-mode")
	})
	return script(Params{"tf_args": words(args...), "tf_pyxis": boolParam(containers), "tf_exit_squeue": strconv.Itoa(exitSqueue)}, "slurm-preflight")
}

// slurmFacts is what slurm-preflight.sh printed.
type slurmFacts struct {
	partitions       map[string]slurmPartition
	order            []string
	defaultPartition string
	gpus             map[string]int // the most GPUs of one node, by partition
	pyxis            string         // "yes", "no" or "" (not asked)
	test             string         // sbatch --test-only's words
	testRC           int
}

type slurmPartition struct {
	maxTime string // as scontrol prints it
	minutes int    // math.MaxInt for UNLIMITED
}

var gresGPU = regexp.MustCompile(`(?:^|,)gpu(?::[^:,(]+)?:([0-9]+)`)

func parseSlurmPreflight(out string) slurmFacts {
	f := slurmFacts{partitions: map[string]slurmPartition{}, gpus: map[string]int{}}
	section := ""
	var test []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "@partitions", l == "@nodes", l == "@test":
			section = l
			continue
		case strings.HasPrefix(l, "@pyxis "):
			f.pyxis = strings.TrimPrefix(l, "@pyxis ")
			continue
		case strings.HasPrefix(l, "@rc "):
			f.testRC, _ = strconv.Atoi(strings.TrimPrefix(l, "@rc "))
			section = ""
			continue
		}
		switch section {
		case "@partitions":
			fields := map[string]string{}
			for _, w := range strings.Fields(l) {
				if k, v, ok := strings.Cut(w, "="); ok {
					fields[k] = v
				}
			}
			name := fields["PartitionName"]
			if name == "" {
				continue
			}
			p := slurmPartition{maxTime: fields["MaxTime"], minutes: math.MaxInt}
			if m, err := plan.SlurmMinutes(p.maxTime); err == nil {
				p.minutes = m
			}
			f.partitions[name] = p
			f.order = append(f.order, name)
			if fields["Default"] == "YES" {
				f.defaultPartition = name
			}
		case "@nodes":
			parts := strings.Split(l, "|")
			if len(parts) < 3 {
				continue
			}
			part := strings.TrimSuffix(parts[0], "*")
			n := 0
			for _, m := range gresGPU.FindAllStringSubmatch(parts[2], -1) {
				c, _ := strconv.Atoi(m[1])
				n += c
			}
			f.gpus[part] = max(f.gpus[part], n)
		case "@test":
			if strings.TrimSpace(l) != "" {
				test = append(test, strings.TrimSpace(l))
			}
		}
	}
	f.test = strings.Join(test, " ")
	return f
}

// checkPool says what of pool the cluster cannot run, naming the key to
// change; nil when nothing.
func checkPool(pool *plan.Instance, f slurmFacts, containers bool) error {
	part := pool.Pool.Partition
	if part == "" {
		part = f.defaultPartition
	}
	p, ok := f.partitions[part]
	switch {
	case part == "":
		return fmt.Errorf("pool %s: the cluster has no default partition: give partition: (it has %s)", pool.Name, strings.Join(f.order, ", "))
	case !ok:
		return fmt.Errorf("pool %s: partition: %s does not exist on the cluster (it has %s)", pool.Name, part, strings.Join(f.order, ", "))
	case pool.Pool.Minutes > 0 && pool.Pool.Minutes > p.minutes:
		return fmt.Errorf("pool %s: time: %s (%d minutes) is over partition %s's MaxTime %s: lower time: or pick a partition that allows it", pool.Name, pool.Pool.Time, pool.Pool.Minutes, part, p.maxTime)
	case pool.GPUs > f.gpus[part]:
		return fmt.Errorf("pool %s: gpus: %d is more than any node of partition %s has (at most %d): lower gpus: or pick a partition with bigger nodes", pool.Name, pool.GPUs, part, f.gpus[part])
	case containers && f.pyxis == "no":
		return fmt.Errorf("pool %s: the plan runs containers (image:), but this cluster's srun has no --container-image: it has no container plugin (pyxis); run the commands without image:, or on a cluster with pyxis", pool.Name)
	case f.testRC != 0:
		return fmt.Errorf("pool %s: sbatch --test-only refuses its jobs (check partition, account, qos, mem, constraint): %s", pool.Name, f.test)
	}
	return nil
}
