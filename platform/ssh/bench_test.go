package ssh

import (
	"context"
	"fmt"
	"testing"

	"github.com/taoflow/taoflow/platform/platformtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// The benchmarks print figures; nothing asserts on them. On the test server
// every command also pays for the remote login shell's startup files.

func BenchmarkExecMultiplexed(b *testing.B) { benchmarkExec(b, false) }

func BenchmarkExecFresh(b *testing.B) { benchmarkExec(b, true) }

// benchmarkExec runs trivial commands one after another on one instance and
// reports commands per second and handshakes per command.
func benchmarkExec(b *testing.B, noMux bool) {
	srv := sshtest.Start(b)
	s, inst := newSSH(b, srv, Config{NoMultiplex: noMux})
	ctx := context.Background()
	if _, err := s.Exec(ctx, inst, "true", nil); err != nil { // the master, if any
		b.Fatal(err)
	}
	before := srv.Handshakes()
	for b.Loop() {
		res, err := s.Exec(ctx, inst, "true", nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec: exit %d, %v", res.ExitCode, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	b.ReportMetric(float64(srv.Handshakes()-before)/float64(b.N), "handshakes/cmd")
}

// BenchmarkHandshakesPerJob runs the commands of a typical job on a new
// platform each time — submit, ten polls, cleanup — and closes it, and
// reports the handshakes and seconds that costs.
func BenchmarkHandshakesPerJob(b *testing.B) {
	for name, noMux := range map[string]bool{"multiplexed": false, "fresh": true} {
		b.Run(name, func(b *testing.B) {
			srv := sshtest.Start(b)
			ctx := context.Background()
			before := srv.Handshakes()
			for b.Loop() {
				s := New(Config{Run: "bench", ConfigFile: srv.ConfigFile, NoMultiplex: noMux})
				inst := instance(srv)
				script := []string{"echo submitted"}
				for i := range 10 {
					script = append(script, fmt.Sprintf("echo poll %d", i))
				}
				script = append(script, "echo cleaned up")
				for _, sc := range script {
					if res, err := s.Exec(ctx, inst, sc, nil); err != nil || res.ExitCode != 0 {
						b.Fatalf("%s: exit %d, %v", sc, res.ExitCode, err)
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(srv.Handshakes()-before)/float64(b.N), "handshakes/job")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/job")
		})
	}
}

// BenchmarkExecScriptSize: scripts of 1 KiB to 10 MiB over a multiplexed
// connection (platformtest.BenchExecScriptSize).
func BenchmarkExecScriptSize(b *testing.B) {
	srv := sshtest.Start(b)
	s, inst := newSSH(b, srv, Config{})
	platformtest.BenchExecScriptSize(b, s, inst)
}
