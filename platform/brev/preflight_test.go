package brev

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// TestCheckRefusesWhatCannotBeTracked: before anything is created, Check
// makes sure brev ls --json works and parses. A logged-out brev (its
// prompt on stdout, exit 1) is ErrNotLoggedIn; a banner before the JSON
// is refused, saying so; brev v0.6.317, which fails in its onboarding
// prompt after printing its version, is reported as too old. None of them
// reaches brev create.
func TestCheckRefusesWhatCannotBeTracked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts brevtest.Options
		want []string
		is   error
	}{
		{"logged out", brevtest.Options{LoggedOut: true}, []string{"brev is not logged in: run `brev login`"}, ErrNotLoggedIn},
		{"banner", brevtest.Options{Banner: "A new version of brev has been released!"}, []string{"brev ls --json", "banner", "A new version"}, nil},
		{"onboarding prompt", brevtest.Options{Version: "v0.6.317", OnboardingPrompt: true}, []string{"v0.6.317 is too old", MinVersion}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := brevtest.Start(t, tc.opts)
			b, run := newBrev(t, f, Config{})
			_, err := b.Create(context.Background(), run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
			if err == nil {
				t.Fatal("Create succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Create: %v; want it to say %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Create: %v; want errors.Is %v", err, tc.is)
			}
			if tc.name != "logged out" && strings.Contains(err.Error(), "logged in") {
				t.Errorf("Create: %v; brev is logged in", err)
			}
			if n := len(f.CallsOf("create", "")); n != 0 {
				t.Errorf("brev create ran %d times", n)
			}
		})
	}
}

// TestFind tells an instance that is there from one gone, being deleted
// or stopped, from brev ls alone.
func TestFind(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, DeleteTicks: 100})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	inst := createGPU(t, b, f, run)
	if err := b.Find(ctx, inst); err != nil {
		t.Errorf("Find of a RUNNING instance: %v", err)
	}
	f.SetStatus(inst.Ref, "STOPPED")
	if err := b.Find(ctx, inst); !errors.Is(err, platform.ErrStopped) {
		t.Errorf("Find of a STOPPED instance: %v; want ErrStopped", err)
	}
	f.SetStatus(inst.Ref, "DELETING")
	if err := b.Find(ctx, inst); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Find of a DELETING instance: %v; want ErrNotFound", err)
	}
	gone := platform.Instance{Name: "x", Ref: InstanceName(run, "never"), Created: true}
	if err := b.Find(ctx, gone); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Find of an instance brev does not list: %v; want ErrNotFound", err)
	}
}

// TestDeleteOfDeletingInstance: an instance that is DELETING counts as
// being deleted whatever brev delete answers for it (an orphan's second
// delete).
func TestDeleteOfDeletingInstance(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, DeleteTicks: 100})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	inst := createGPU(t, b, f, run)
	f.SetStatus(inst.Ref, "DELETING")
	f.Inject(brevtest.Fault{Kind: "delete-error", Name: inst.Ref, Times: 3})
	if err := b.Delete(ctx, inst); err != nil {
		t.Errorf("Delete of a DELETING instance whose brev delete fails: %v", err)
	}
}

// TestLedger: Create records the name of the instance in the user's ledger
// before brev create runs (a failed create included), and nothing else is
// there.
func TestLedger(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{})
	if want := filepath.Join(f.Home, ".local", "state", "taoflow", "brev-created"); b.Ledger() != want {
		t.Errorf("ledger %s; want %s (under the user's HOME)", b.Ledger(), want)
	}
	inst := createGPU(t, b, f, run)
	f.Inject(brevtest.Fault{Kind: "create-failure"})
	if _, err := b.Create(context.Background(), run, platform.Spec{Name: "bad", Type: "g5.xlarge"}); err == nil {
		t.Fatal("a create that ends in FAILURE succeeded")
	}
	f.AddExisting("not-ours")
	got, err := Recorded(b.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	if !got[inst.Ref] || !got[InstanceName(run, "bad")] || len(got) != 2 {
		t.Errorf("ledger holds %v; want %s and %s", got, inst.Ref, InstanceName(run, "bad"))
	}
}

// TestExecTransportClosesBrevMasters: brev exec's own ssh keeps a master
// connection for ten minutes (ControlPersist 10m in the host entries brev
// writes). An existing instance is never deleted, so Close must ask it to
// exit; a created one's goes when it is deleted.
func TestExecTransportClosesBrevMasters(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv, ControlMaster: true})
	f.AddExisting("shared-box")
	b, run := newBrev(t, f, Config{Transport: TransportExec})
	ctx := context.Background()
	box, err := b.Create(ctx, run, platform.Spec{Name: "box", Existing: "shared-box"})
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: "g5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []platform.Instance{box, gpu} {
		if res, err := b.Exec(ctx, in, "echo hi", nil); err != nil || string(res.Stdout) != "hi\n" {
			t.Fatalf("Exec on %s = %+v, %v", in.Name, res, err)
		}
	}
	if len(f.Masters()) != 2 {
		t.Fatalf("brev's ssh masters: %v; want one per instance (the fake does not multiplex)", f.Masters())
	}
	if err := b.Delete(ctx, gpu); err != nil {
		t.Fatal(err)
	}
	waitMasters(t, f, 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitMasters(t, f, 0)
	f.CheckNoneAlive(t)
}

// waitMasters waits until f has n of brev's ssh masters left (a master
// asked to exit takes a moment to go), failing after a while.
func waitMasters(t *testing.T, f *brevtest.Fake, n int) {
	t.Helper()
	if !testrig.Within(10*time.Second, func() bool { return len(f.Masters()) == n }) {
		t.Fatalf("brev's ssh masters: %v; want %d", f.Masters(), n)
	}
}
