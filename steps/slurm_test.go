package steps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// TestSlurmStates maps each of Slurm's job states, as squeue prints them
// (its -O format), with what the job's directory holds, onto a wait's
// outcome.
func TestSlurmStates(t *testing.T) {
	for name, tc := range map[string]struct {
		squeue       string // "" for a job squeue no longer lists
		jid, rc      string
		canceled     bool
		state        jobState
		code         int
		class, note  string
		reasonPrefix string
	}{
		"pending":   {squeue: "7|J|PENDING|Resources|0:00|0|", jid: "7", rc: "-", state: stateRunning, note: "pending in Slurm's queue (Resources)"},
		"qos limit": {squeue: "7|J|PENDING|QOSMaxJobsPerUserLimit|0:00|0|", jid: "7", rc: "-", state: stateRunning, note: "pending in Slurm's queue (QOSMaxJobsPerUserLimit)"},
		"running":   {squeue: "7|J|RUNNING|None|1:02:03|0|", jid: "7", rc: "-", state: stateRunning},
		"completed": {squeue: "7|J|COMPLETED|None|0:05|0|", jid: "7", rc: "0", state: stateExited},
		// The batch script wrote rc 0 as its last act; Slurm lags.
		"rc 0 running":    {squeue: "7|J|RUNNING|None|0:05|0|", jid: "7", rc: "0", state: stateExited},
		"rc 0 completing": {squeue: "7|J|COMPLETING|None|0:05|0|", jid: "7", rc: "0", state: stateExited},
		// Another code waits for Slurm's own word (it may be OOM).
		"rc 137 running":  {squeue: "7|J|RUNNING|None|0:05|0|", jid: "7", rc: "137", state: stateRunning},
		"rc 1 completing": {squeue: "7|J|COMPLETING|None|0:05|0|", jid: "7", rc: "1", state: stateRunning},
		"failed":          {squeue: "7|J|FAILED|NonZeroExitCode|0:05|768|", jid: "7", rc: "3", state: stateExited, code: 3},
		"failed no rc":    {squeue: "7|J|FAILED|NonZeroExitCode|0:05|768|", jid: "7", rc: "-", state: stateExited, code: 3},
		"signal":          {squeue: "7|J|FAILED|NonZeroExitCode|0:05|9|", jid: "7", rc: "-", state: stateExited, code: 137},
		"timeout":         {squeue: "7|J|TIMEOUT|TimeLimit|1:27|15|", jid: "7", rc: "-", state: stateExited, code: 143, class: ClassTimedOut},
		"cancelled":       {squeue: "7|J|CANCELLED|None|0:09|15|", jid: "7", rc: "-", canceled: true, state: stateExited, code: 143, class: ClassCanceled},
		"cancelled by":    {squeue: "7|J|CANCELLED by 0|None|0:09|15|", jid: "7", rc: "-", state: stateExited, code: 143, class: ClassCanceled},
		"oom":             {squeue: "7|J|OUT_OF_MEMORY|OutOfMemory|0:09|0|", jid: "7", rc: "-", state: stateExited, class: ClassJobFailed},
		"node fail":       {squeue: "7|J|NODE_FAIL|None|0:09|0|", jid: "7", rc: "-", state: stateExited, class: ClassVanished},
		"preempted":       {squeue: "7|J|PREEMPTED|None|0:09|0|", jid: "7", rc: "-", state: stateExited, class: ClassVanished},
		"boot fail":       {squeue: "7|J|BOOT_FAIL|None|0:00|0|", jid: "7", rc: "-", state: stateExited, class: ClassVanished},
		"purged with rc":  {jid: "7", rc: "2", state: stateExited, code: 2},
		"purged":          {jid: "7", rc: "-", state: stateVanished, reasonPrefix: "Slurm no longer lists job 7"},
		"never queued":    {jid: "-", rc: "-", state: stateMissing},
		"another job":     {squeue: "9|J|RUNNING|None|0:09|0|", jid: "7", rc: "-", state: stateVanished, reasonPrefix: "Slurm no longer lists job 7"},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if tc.squeue != "" {
				out.WriteString("@q " + tc.squeue + "\n")
			}
			c := "0"
			if tc.canceled {
				c = "1"
			}
			out.WriteString("@job 0 " + tc.jid + " " + tc.rc + " " + c + " 5 5\nhello@status \n")
			obs, err := parseSlurmStatus([]byte(out.String()), []probe{{ID: "J"}})
			if err != nil {
				t.Fatal(err)
			}
			o := obs[0]
			if o.State != tc.state || o.Code != tc.code || o.Note != tc.note || string(o.Log) != "hello" || o.Canceled != tc.canceled {
				t.Errorf("got state %s code %d note %q log %q canceled %v; want %s %d %q", o.State, o.Code, o.Note, o.Log, o.Canceled, tc.state, tc.code, tc.note)
			}
			class := ""
			if o.Fail != nil {
				class = o.Fail.Class
			}
			if class != tc.class {
				t.Errorf("class %q, want %q (%v)", class, tc.class, o.Fail)
			}
			if !strings.HasPrefix(o.Reason, tc.reasonPrefix) {
				t.Errorf("reason %q, want it to start %q", o.Reason, tc.reasonPrefix)
			}
		})
	}
}

func TestSlurmElapsed(t *testing.T) {
	for in, want := range map[string]time.Duration{"0:00": 0, "0:05": 5 * time.Second, "1:02:03": time.Hour + 2*time.Minute + 3*time.Second, "2-01:00:00": 49 * time.Hour, "INVALID": 0} {
		if got := slurmElapsed(in); got != want {
			t.Errorf("slurmElapsed(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestSlurmPreflightParse reads what scontrol and sinfo print of a
// cluster (GRES with and without a type and socket binding) and checks
// pools against it.
func TestSlurmPreflightParse(t *testing.T) {
	out := `@partitions
PartitionName=debug AllowGroups=ALL Default=YES MaxTime=UNLIMITED Nodes=vm State=UP
PartitionName=short AllowGroups=ALL MaxTime=00:01:00 Nodes=vm State=UP
PartitionName=gpu MaxTime=2-00:00:00 Nodes=g[1-2] State=UP
@nodes
debug*|vm|gpu:2
short|vm|gpu:2
gpu|g1|gpu:a100:4(S:0-1)
gpu|g2|gpu:a100:8(S:0-1),shard:16
@test
sbatch: Job 5 to start at 2026-12-06T09:00:00 using 1 processors on nodes vm in partition debug
@rc 0
`
	f := parseSlurmPreflight(out)
	if diff := cmp.Diff(map[string]int{"debug": 2, "short": 2, "gpu": 8}, f.gpus); diff != "" {
		t.Errorf("gpus (-want +got):\n%s", diff)
	}
	if f.defaultPartition != "debug" || f.partitions["gpu"].minutes != 2880 || f.partitions["short"].minutes != 1 {
		t.Errorf("partitions %+v, default %q", f.partitions, f.defaultPartition)
	}
	pool := func(p plan.Pool, gpus int) *plan.Instance { return &plan.Instance{Name: "p", Pool: p, GPUs: gpus} }
	for name, tc := range map[string]struct {
		in   *plan.Instance
		want string
	}{
		"default fits":  {pool(plan.Pool{Minutes: 10000}, 2), ""},
		"gpu fits":      {pool(plan.Pool{Partition: "gpu", Minutes: 2880}, 8), ""},
		"unknown":       {pool(plan.Pool{Partition: "big"}, 0), "pool p: partition: big does not exist on the cluster (it has debug, short, gpu)"},
		"too long":      {pool(plan.Pool{Partition: "short", Time: "2", Minutes: 2}, 0), "pool p: time: 2 (2 minutes) is over partition short's MaxTime 00:01:00"},
		"too many gpus": {pool(plan.Pool{Partition: "gpu"}, 9), "pool p: gpus: 9 is more than any node of partition gpu has (at most 8)"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkPool(tc.in, f, false)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
				t.Errorf("checkPool = %q, want %q", got, tc.want)
			}
		})
	}
	f.testRC, f.test = 1, "sbatch: error: Batch job submission failed: Invalid qos specification"
	if err := checkPool(pool(plan.Pool{}, 0), f, false); err == nil || !strings.Contains(err.Error(), "Invalid qos specification") {
		t.Errorf("a refused --test-only: %v", err)
	}
	f.testRC, f.pyxis = 0, "no"
	if err := checkPool(pool(plan.Pool{}, 0), f, true); err == nil || !strings.Contains(err.Error(), "no container plugin (pyxis)") {
		t.Errorf("an image without pyxis: %v", err)
	}
}

// TestSbatchArgs: the pool's shape becomes sbatch's options; nothing the
// job's environment holds does.
func TestSbatchArgs(t *testing.T) {
	in := &plan.Instance{Name: "a100", GPUs: 4, Pool: plan.Pool{Partition: "gpu", Account: "lab", QOS: "high", CPUs: 16, Mem: "64G", Minutes: 240, Constraint: "a100&ib"}}
	want := []string{"--parsable", "--job-name=tf-r-train.c1", "--comment=taoflow run=r pool=a100", "--open-mode=append",
		"--partition=gpu", "--account=lab", "--qos=high", "--cpus-per-task=16", "--mem=64G", "--time=240", "--constraint=a100&ib", "--gpus=4"}
	if diff := cmp.Diff(want, SbatchArgs("r", "tf-r-train.c1", in)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"srun", "--container-image=nvcr.io/nvidia/tao/tao-toolkit:6.0", "--container-mounts=/data:/data,/scratch:/results", "--container-workdir=/results"},
		SrunContainer("nvcr.io/nvidia/tao/tao-toolkit:6.0", "/results", []string{"/data:/data", "/scratch:/results"})); diff != "" {
		t.Errorf("srun (-want +got):\n%s", diff)
	}
}

// TestSlurmBatchScript: a job with an image runs its command's words
// through pyxis's srun (the batch script holds no secret, only the secrets
// file's name); one without runs cmd.sh.
func TestSlurmBatchScript(t *testing.T) {
	r := &slurmRT{s: New(Config{RunID: "r"})}
	got := r.batchScript(jobSpec{ID: "tf-r-train.a", Image: "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", Command: "tao_train --lr 0.1",
		Workdir: "/results", Volumes: []string{"/data:/data"}, Env: []string{"NGC_KEY"}})
	if !strings.HasPrefix(got, "#!/bin/sh\n") {
		t.Errorf("the batch script does not start with #!: %q", got[:min(len(got), 40)])
	}
	want := "tf_srun='srun --container-image=nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --container-mounts=/data:/data --container-workdir=/results tao_train --lr 0.1'"
	if !strings.Contains(got, want) {
		t.Errorf("batch script lacks %s:\n%s", want, got)
	}
	if strings.Contains(got, "NGC_KEY") {
		t.Errorf("the batch script names a secret:\n%s", got)
	}
	plain := r.batchScript(jobSpec{ID: "tf-r-train.a", Command: "python train.py"})
	if !strings.Contains(plain, "tf_srun=''") || !strings.Contains(plain, `sh "$tf_d/cmd.sh"`) {
		t.Errorf("a host job's batch script:\n%s", plain)
	}
}

// TestSlurmResubmitScript: the script a wait's retry runs queues the job
// again only for the end states that are not the job's fault, with the
// job's own sbatch options (its name, so adoption and cleanup find it),
// appending to its log and replacing its id; and it is valid sh.
func TestSlurmResubmitScript(t *testing.T) {
	p := &plan.Plan{Instances: []*plan.Instance{{Name: "g", GPUs: 2, Pool: plan.Pool{Partition: "gpu"}}}}
	r := &slurmRT{s: New(Config{RunID: "r1", Plan: p})}
	got := r.resubmitScript(platform.Instance{Name: "g"}, "tf-r1-train.i-1")
	for _, want := range []string{
		"tf_dir='" + plan.DefaultSlurmWorkdir + "/r1/tf-r1-train.i-1'",
		"--job-name=tf-r1-train.i-1", "--open-mode=append", "--partition=gpu", "--gpus=2",
		"NODE_FAIL|BOOT_FAIL|PREEMPTED) ;;",
		`printf '%s\n' "$tf_id" > "$d/id"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the resubmit script lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "COMPLETED") || strings.Contains(got, "TIMEOUT") {
		t.Errorf("the resubmit script names a state it must not resubmit:\n%s", got)
	}
	if out, err := exec.Command("sh", "-n", "-c", got).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s", err, out)
	}
}

// TestSlurmPullImport: pull on slurm imports with enroot (registry set
// off by "#", as enroot reads it) into a file of the run's directory whose
// name holds no "/" or "..", and the job's script runs that file once it
// exists: its srun's --container-image is rewritten to it.
func TestSlurmPullImport(t *testing.T) {
	for image, want := range map[string]string{
		"nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt": "docker://nvcr.io#nvidia/tao/tao-toolkit:6.0.0-pyt",
		"localhost:5000/x:1":                       "docker://localhost:5000#x:1",
		"localhost/x":                              "docker://localhost#x",
		"ubuntu:24.04":                             "docker://ubuntu:24.04",
		"library/ubuntu":                           "docker://library/ubuntu",
	} {
		if got := EnrootURI(image); got != want {
			t.Errorf("EnrootURI(%q) = %q, want %q", image, got, want)
		}
	}
	r := &slurmRT{s: New(Config{RunID: "r1"})}
	for image, want := range map[string]string{
		"nvcr.io/nvidia/tao/tao-toolkit:6.0": plan.DefaultSlurmWorkdir + "/r1/images/nvcr.io+nvidia+tao+tao-toolkit+6.0.sqsh",
		"../../etc/x y$(z)":                  plan.DefaultSlurmWorkdir + "/r1/images/+..+etc+x+y++z+.sqsh",
	} {
		if got := r.sqshPath(image); got != want {
			t.Errorf("sqshPath(%q) = %q, want %q", image, got, want)
		}
	}
	sc := r.slurmPullScript("nvcr.io/nvidia/tao/tao-toolkit:6.0")
	for _, want := range []string{"tf_uri='docker://nvcr.io#nvidia/tao/tao-toolkit:6.0'", `enroot import -o "$tf_p" "$tf_uri"`, "tf_exit_noenroot=96"} {
		if !strings.Contains(sc, want) {
			t.Errorf("the pull script lacks %q:\n%s", want, sc)
		}
	}
	if out, err := exec.Command("sh", "-n", "-c", sc).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s", err, out)
	}

	// The batch script, run by sh in a job directory with "echo" in srun's
	// place: the image's file, once it exists, replaces the image.
	dir := t.TempDir()
	sqsh := filepath.Join(dir, "img.sqsh")
	job := script(Params{"tf_workdir": dir, "tf_sqsh": sqsh, "tf_srun": words("echo", "--container-image=nvcr.io/x:1", "--container-workdir=/w", "cmd", "a b")}, "home", "slurm-job")
	run := func() string {
		t.Helper()
		c := exec.Command("sh", "-c", job)
		c.Dir = dir
		out, err := c.Output()
		if err != nil {
			t.Fatalf("batch script: %v", err)
		}
		return string(out)
	}
	if got := run(); got != "--container-image=nvcr.io/x:1 --container-workdir=/w cmd a b\n" {
		t.Errorf("without the file: %q", got)
	}
	if err := os.WriteFile(sqsh, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := run(), "--container-image="+sqsh+" --container-workdir=/w cmd a b\n"; got != want {
		t.Errorf("with the file: %q, want %q", got, want)
	}
	if b := r.batchScript(jobSpec{ID: "tf-r1-t.a", Image: "nvcr.io/x:1", Command: "c"}); !strings.Contains(b, "tf_sqsh='"+plan.DefaultSlurmWorkdir+"/r1/images/nvcr.io+x+1.sqsh'") {
		t.Errorf("the batch script names no image file:\n%s", b)
	}
}
