package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/taoflow/taoflow/engine"
)

// settingsErr is a step's failure on its own settings (steps.Error of
// class "invalid settings" says so the same way).
type settingsErr struct{}

func (settingsErr) Error() string       { return "invalid settings: with.to names no bucket" }
func (settingsErr) SettingsError() bool { return true }

const saveTwice = `
taoflow: 1
name: save
instances: {a: {}}
steps:
  - {id: train, uses: run, with: {command: train, results: ~/out}}
  - {id: wait, uses: wait, needs: [train]}
  - id: up
    uses: upload-s3
    needs: [wait]
    continue_on_error: true
    with: {from: ~/out, to: "s3://bucket/x"}
  - id: bring
    uses: fetch
    needs: [%s]
    with: {from: %s, to: out}
secrets: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]
`

// TestReleaseOnlyForRealRisk: the instance is kept (stopped) only when a
// results copy that started may have left results nowhere else (issue 21
// item 4). An upload that failed on its own settings copied nothing; a
// verified fetch of the same directory that started after the failed
// upload saved what it would have; a fetch of another directory, or one
// that started before, did not.
func TestReleaseOnlyForRealRisk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fetchNeed string // what the fetch needs: "up" runs it after the upload
		fetchFrom string
		upErr     error
		fetchErr  error
		stopped   bool
	}{
		{name: "settings error releases", fetchNeed: "wait", fetchFrom: "~/elsewhere", upErr: settingsErr{}, stopped: false},
		{name: "real failure stops", fetchNeed: "wait", fetchFrom: "~/elsewhere", upErr: errors.New("upload failed: exit 1"), stopped: true},
		{name: "verified fetch after saves", fetchNeed: "up", fetchFrom: "~/out", upErr: errors.New("upload failed: exit 1"), stopped: false},
		{name: "fetch of a parent after saves", fetchNeed: "up", fetchFrom: `"~/"`, upErr: errors.New("upload failed: exit 1"), stopped: false},
		{name: "verified fetch beside it after the same wait saves", fetchNeed: "wait", fetchFrom: "~/out", upErr: errors.New("upload failed: exit 1"), stopped: false},
		{name: "fetch of another dir does not", fetchNeed: "up", fetchFrom: "~/out2", upErr: errors.New("upload failed: exit 1"), stopped: true},
		{name: "failed fetch does not", fetchNeed: "up", fetchFrom: "~/out", upErr: errors.New("upload failed: exit 1"), fetchErr: errors.New("fetch failed"), stopped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustPlan(t, fmt.Sprintf(saveTwice, tc.fetchNeed, tc.fetchFrom))
			f := newFake(func(ctx context.Context, tk *engine.Task) error {
				switch tk.Node.Step.ID {
				case "up":
					return tc.upErr
				case "bring":
					return tc.fetchErr
				}
				return nil
			})
			s := run(t, g, f)
			wantMode := "release a delete"
			if tc.stopped {
				wantMode = "release a stop"
			}
			if got := f.has("release a"); !slices.Contains(got, wantMode) {
				t.Errorf("releases = %v, want %q (states %v)", got, wantMode, s.States)
			}
			if got := len(s.Stopped) == 1; got != tc.stopped {
				t.Errorf("Stopped = %v, want stopped %v", s.Stopped, tc.stopped)
			}
		})
	}
}
