package steps

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/ssh"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// countingStreamer counts a streaming platform's commands: execs as they
// start, polls (status scripts) once they have returned.
type countingStreamer struct {
	pf                    *ssh.SSH
	execs, streams, polls atomic.Int64
}

func (c *countingStreamer) Kind() string { return c.pf.Kind() }

func (c *countingStreamer) Exec(ctx context.Context, inst platform.Instance, script string, stdin io.Reader) (platform.Result, error) {
	c.execs.Add(1)
	res, err := c.pf.Exec(ctx, inst, script, stdin)
	if strings.Contains(script, "@job ") {
		c.polls.Add(1)
	}
	return res, err
}

func (c *countingStreamer) ExecStream(ctx context.Context, inst platform.Instance, script string, stdin io.Reader, stdout io.Writer) (platform.Result, error) {
	c.streams.Add(1)
	return c.pf.ExecStream(ctx, inst, script, stdin, stdout)
}

// BenchmarkJobEndLatency: over a real sshd, jobs of `sleep 0.3` run one
// after the other, each waited for with interval 10s (the default). The
// figures: p50 and p95 of the time from the job's exit (a timestamp its
// command writes last) to the wait's return, and the remote commands per
// job — execs (launch and polls) and watch streams (one per instance,
// kept between jobs).
func BenchmarkJobEndLatency(b *testing.B) {
	srv := sshtest.Start(b)
	home, err := srv.AddSandbox("box")
	if err != nil {
		b.Fatal(err)
	}
	pf := &countingStreamer{pf: ssh.New(ssh.Config{Run: "r1", ConfigFile: srv.ConfigFile})}
	b.Cleanup(func() { _ = pf.pf.Close() })
	s := New(Config{Platform: pf, RunID: "r1", Plan: &plan.Plan{}, PollInterval: 10 * time.Second})
	b.Cleanup(s.Close)
	inst := platform.Instance{Name: "box", Ref: "box"}
	b.Cleanup(func() { killJobs(platform.Instance{Ref: home}) })
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		id := "tf-r1-j" + strconv.Itoa(i) + "-box"
		end := filepath.Join(home, "end-"+strconv.Itoa(i))
		err := s.Do(b.Context(), Request{NodeID: "run@box", Step: &plan.Step{ID: "run", Uses: plan.KindRun}, Instance: inst,
			With: with("command", `sleep 0.3; date +%s.%N > "$HOME/end-`+strconv.Itoa(i)+`"`), JobID: id, Log: io.Discard})
		if err != nil {
			b.Fatalf("run: %v", err)
		}
		err = s.Do(b.Context(), Request{NodeID: "wait@box", Step: &plan.Step{ID: "wait", Uses: plan.KindWait}, Instance: inst,
			Jobs: []Job{{ID: id}}, Log: io.Discard, Progress: func(progress.Report) {}})
		returned := time.Now()
		if err != nil {
			b.Fatalf("wait: %v", err)
		}
		raw, err := os.ReadFile(end)
		if err != nil {
			b.Fatal(err)
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, returned.Sub(time.Unix(0, int64(sec*1e9))))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.95).Milliseconds()), "p95-ms")
	b.ReportMetric(float64(pf.execs.Load())/float64(b.N), "execs/job")
	b.ReportMetric(float64(pf.streams.Load())/float64(b.N), "streams/job")
}
