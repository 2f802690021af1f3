package testrig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestS3(t *testing.T) {
	s := StartS3(t)
	bucket := UniqueName(t)
	s.CreateBucket(t, bucket)

	src := t.TempDir()
	files := map[string]string{
		"status.json":                          `{"epoch": 1}` + "\n",
		"model_epoch_000_step_00010.pth":       strings.Repeat("w", 3000),
		"lightning_logs/version_0/metrics.csv": "epoch,loss\n0,0.5\n",
		"empty.txt":                            "",
	}
	want := map[string]int64{}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want["run1/train/"+name] = int64(len(content))
	}

	if out, err := s.AWS(t, "s3", "sync", src, "s3://"+bucket+"/run1/train"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	cases := map[string]struct {
		prefix string
		want   map[string]int64
	}{
		"everything synced": {prefix: "run1/", want: want},
		"one subdirectory": {prefix: "run1/train/lightning_logs/", want: map[string]int64{
			"run1/train/lightning_logs/version_0/metrics.csv": int64(len(files["lightning_logs/version_0/metrics.csv"])),
		}},
		"nothing under prefix": {prefix: "run2/", want: map[string]int64{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.List(t, bucket, tc.prefix)); diff != "" {
				t.Errorf("List(%q) (-want +got):\n%s", tc.prefix, diff)
			}
		})
	}

	t.Run("objects land in the posix backend", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(s.Dir, bucket, "run1/train/status.json"))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != files["status.json"] {
			t.Errorf("stored %q, want %q", b, files["status.json"])
		}
	})
	t.Run("a wrong secret is refused", func(t *testing.T) {
		env := append(s.Env(), "AWS_SECRET_ACCESS_KEY=fake-wrong-secret")
		_, err := command(env, nil, tool(t, "aws"), "--endpoint-url", s.Endpoint, "s3api", "list-objects-v2", "--bucket", bucket)
		if err == nil {
			t.Fatal("listing with a wrong secret succeeded")
		}
		if !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
			t.Errorf("error does not say SignatureDoesNotMatch: %v", err)
		}
	})
}
