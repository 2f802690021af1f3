package steps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

// TestUploadS3 uploads to a real S3 server with the AWS CLI on a local
// sandbox, and checks what arrived with a listing of its own.
func TestUploadS3(t *testing.T) {
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	results := map[string]string{
		"train/status.json":       `{"epoch": 1}` + "\n",
		"train/model_epoch_1.pth": strings.Repeat("w", 3000),
		"train/scratch.tmp":       "tmp",
		"notes/a b.txt":           "space in the name",
		"empty":                   "",
		"taoflow-run.json":        "a stale manifest in the source",
	}
	tests := map[string]struct {
		with      []any
		secretKey string // "" is the right one
		setup     func(t *testing.T, home, prefix string)
		want      []string // relative keys in S3, besides the manifest
		wantClass string
		wantMsg   string
	}{
		"everything": {
			want: []string{"empty", "notes/a b.txt", "train/model_epoch_1.pth", "train/scratch.tmp", "train/status.json"},
		},
		"excludes and symlinks": {
			// Symlinks are not followed (aws s3 sync --no-follow-symlinks):
			// a result link to a file outside the results, a host-only file,
			// must not upload that file; S3 has no links, so a link inside
			// the results is not uploaded either.
			with: []any{"exclude", []string{"*.tmp", "notes/*"}},
			setup: func(t *testing.T, home, _ string) {
				if err := os.Symlink("model_epoch_1.pth", filepath.Join(home, "res", "train", "latest.pth")); err != nil {
					t.Fatal(err)
				}
				hostOnly := filepath.Join(t.TempDir(), "host-only.txt")
				if err := os.WriteFile(hostOnly, []byte("host-only-content"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(hostOnly, filepath.Join(home, "res", "train", "leak.txt")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"empty", "train/model_epoch_1.pth", "train/status.json"},
		},
		"stale object at the destination": {
			setup: func(t *testing.T, _, prefix string) {
				if _, err := s3.AWS(t, "s3", "cp", "/etc/hostname", "s3://"+bucket+"/"+prefix+"old.bin"); err != nil {
					t.Fatal(err)
				}
			},
			wantClass: ClassMismatch, wantMsg: "old.bin is there but not in the source",
		},
		"stale object, not verified": {
			with: []any{"verify", false},
			setup: func(t *testing.T, _, prefix string) {
				if _, err := s3.AWS(t, "s3", "cp", "/etc/hostname", "s3://"+bucket+"/"+prefix+"old.bin"); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"empty", "notes/a b.txt", "old.bin", "train/model_epoch_1.pth", "train/scratch.tmp", "train/status.json"},
		},
		"missing source": {
			with:      []any{"from", "~/nothing"},
			wantClass: ClassUploadFailed, wantMsg: "~/nothing on a is not a directory",
		},
		"wrong secret key": {
			secretKey: "fake-wrong-secret-0123456789",
			wantClass: ClassUploadFailed, wantMsg: "aws s3 sync on a failed",
		},
		"no such bucket": {
			with:      []any{"to", "s3://" + bucket + "-none/x"},
			wantClass: ClassUploadFailed, wantMsg: "aws s3 sync on a failed",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			secretKey := s3.SecretKey
			if tt.secretKey != "" {
				secretKey = tt.secretKey
			}
			e := newEnv(t, func(c *Config) {
				c.Secrets = testSecrets(t, "AWS_ACCESS_KEY_ID", s3.AccessKey, "AWS_SECRET_ACCESS_KEY", secretKey)
			})
			writeTree(t, filepath.Join(e.inst.Ref, "res"), results)
			prefix := strings.ReplaceAll(name, " ", "-") + "/"
			if tt.setup != nil {
				tt.setup(t, e.inst.Ref, prefix)
			}
			w := with(merge([]any{"from", "~/res", "to", "s3://" + bucket + "/" + prefix, "endpoint_url", s3.Endpoint, "region", s3.Region}, tt.with)...)
			log := &logBuf{}
			err := e.steps.Do(t.Context(), Request{
				NodeID: "upload@a", Step: &plan.Step{ID: "upload", Uses: plan.KindUploadS3},
				Instance: e.inst, With: w, Log: log,
			})
			for what, s := range map[string]string{"log": log.String(), "error": errString(err)} {
				if strings.Contains(s, secretKey) {
					t.Errorf("the %s holds the secret key:\n%s", what, s)
				}
			}
			if tt.wantClass != "" {
				t.Logf("error: %v", err)
				se := stepError(t, err)
				if se.Class != tt.wantClass || !strings.Contains(se.Msg, tt.wantMsg) {
					t.Errorf("error = %v, want class %q with %q\nlog:\n%s", err, tt.wantClass, tt.wantMsg, log)
				}
				if _, ok := s3.List(t, bucket, prefix)[prefix+manifestName]; ok {
					t.Errorf("a failed upload wrote the manifest")
				}
				return
			}
			if err != nil {
				t.Fatalf("upload: %v\nlog:\n%s", err, log)
			}
			got := s3.List(t, bucket, prefix)
			var keys []string
			for k := range got {
				if k != prefix+manifestName {
					keys = append(keys, strings.TrimPrefix(k, prefix))
				}
			}
			slices.Sort(keys)
			if diff := cmp.Diff(tt.want, keys); diff != "" {
				t.Errorf("keys in S3 (-want +got):\n%s", diff)
			}
			out, err := s3.AWS(t, "s3", "cp", "s3://"+bucket+"/"+prefix+manifestName, "-")
			if err != nil {
				t.Fatal(err)
			}
			var m Manifest
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("the manifest is not JSON (did the secrets on stdin get in its way?): %v\n%q", err, out)
			}
			files := 0
			for _, k := range tt.want {
				if k != "old.bin" {
					files++
				}
			}
			if m.Files != int64(files) || m.Node != "upload@a" || m.Instance != "a" {
				t.Errorf("manifest = %+v, want %d files", m, files)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// merge returns the with: pairs of base with those of over replacing
// (or added to) them.
func merge(base, over []any) []any {
	out := append([]any(nil), base...)
next:
	for i := 0; i+1 < len(over); i += 2 {
		for j := 0; j+1 < len(out); j += 2 {
			if out[j] == over[i] {
				out[j+1] = over[i+1]
				continue next
			}
		}
		out = append(out, over[i], over[i+1])
	}
	return out
}
