package steps

import (
	"errors"
	"testing"

	"github.com/taoflow/taoflow/plan"
)

// TestCheckSettings: what a step refuses on its own settings when it runs
// is found by CheckSettings with nothing run (issue 21 item 3), and such a
// failure is a settings error (the engine then releases the instance:
// nothing was copied, issue 21 item 4); a failure of the copy is not.
func TestCheckSettings(t *testing.T) {
	s := New(Config{RunID: "RUN", BaseDir: t.TempDir()})
	for _, tc := range []struct {
		name, uses string
		with       *plan.Value
		class      string // "" for none
	}{
		{"s3 upload", plan.KindUploadS3, with("from", "~/r", "to", "s3://bucket/RUN"), ""},
		{"s3 with no bucket", plan.KindUploadS3, with("from", "~/r", "to", "s3:///RUN"), ClassInvalidConfig},
		{"not a URL", plan.KindUploadS3, with("from", "~/r", "to", "s3:/RUN"), ClassInvalidConfig},
		{"bad region", plan.KindUploadS3, with("from", "~/r", "to", "s3://b/RUN", "region", "-x"), ClassInvalidConfig},
		{"file exclude", plan.KindUploadS3, with("from", "~/r", "to", "file:///srv/out", "exclude", []string{"*.tmp"}), ClassUnsupported},
		{"relative file", plan.KindUploadS3, with("from", "~/r", "to", "file://out"), ClassInvalidConfig},
		{"bad bucket on download", plan.KindDownloadS3, with("from", "s3://-b", "to", "~/d"), ClassInvalidConfig},
		{"wait interval", plan.KindWait, with("interval", "soon"), ClassInvalidConfig},
		{"container gpus", plan.KindRun, with("image", "busybox", "command", "true", "gpus", "many"), ClassInvalidConfig},
		{"send to home", plan.KindSend, with("from", ".", "to", "~"), ClassInvalidConfig},
		{"pull", plan.KindPull, with("image", "busybox:1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{NodeID: "n", JobID: "tf-RUN-n", Step: &plan.Step{ID: "n", Uses: tc.uses, With: tc.with}, With: tc.with}
			err := s.CheckSettings(req)
			if got := ClassOf(err); got != tc.class {
				t.Fatalf("CheckSettings = %v; want class %q", err, tc.class)
			}
			if err != nil && !IsSettings(err) {
				t.Errorf("%v is not a settings error", err)
			}
		})
	}
	if IsSettings(&Error{Class: ClassUploadFailed, Msg: "copying: exit 1"}) || IsSettings(errors.New("x")) {
		t.Error("a failed copy counts as a settings error")
	}
}
