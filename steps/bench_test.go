package steps

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
)

// BenchmarkContainerPoll measures one poll of a running container whose
// log is 8 MiB long and has nothing new: read from the follower's copy,
// and read whole (flock failing, as on a file system without locks).
func BenchmarkContainerPoll(b *testing.B) {
	b.Run("followed", func(b *testing.B) { benchmarkPoll(b, nil) })
	b.Run("whole", func(b *testing.B) {
		benchmarkPoll(b, map[string]string{"flock": "exit 1"})
	})
}

func benchmarkPoll(b *testing.B, shadow map[string]string) {
	image := testrig.BuildTrainerImage(b, "")
	dockerShim(b, shadow)
	e := newDockerEnv(b, nil)
	id := e.job("train")
	e.runContainer(b, id, "image", image, "command", "-log-mb 8 -epochs 1 -sleep 1ms -hang")
	out, err := testrig.Docker(b, "inspect", "--format", "{{.Id}}", id)
	if err != nil {
		b.Fatal(err)
	}
	// The whole log, once docker has it all: its size the same twice,
	// 100ms apart (so not testrig.Eventually, whose pause is shorter).
	var size int64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the container did not log 8 MiB within a minute")
		}
		res, err := e.local.Exec(context.Background(), e.inst, "docker logs "+strings.TrimSpace(out)+" 2>&1 | wc -c", nil)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
		if n > 8<<20 && n == size {
			break
		}
		size = n
	}
	rt := e.steps.runtimeFor(image)
	probes := []probe{{ID: id, Offset: size}}
	poll := func() {
		obs, err := rt.status(context.Background(), e.inst, probes)
		if err != nil || len(obs[0].Log) != 0 || obs[0].State != stateRunning {
			b.Fatalf("poll: %v %+v", err, obs)
		}
	}
	poll() // starts the follower, if it can
	if shadow == nil {
		copyFile := filepath.Join(e.inst.Ref, jobsDir, id, followFile)
		testrig.Eventually(b, time.Minute, "the follower to copy the log", func() bool {
			fi, err := os.Stat(copyFile)
			return err == nil && fi.Size() == size
		})
	}
	b.ResetTimer()
	for b.Loop() {
		poll()
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB-log")
}
