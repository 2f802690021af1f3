package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

// TestDownloadS3 stages a prefix of a real S3 server (versitygw) in with
// the AWS CLI on a local sandbox: excludes respected, verified by listing,
// a second run copies nothing again (sync), and each failure is a clear
// error that never shows the secret key.
func TestDownloadS3(t *testing.T) {
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"train/a.bin":   strings.Repeat("a", 3000),
		"notes/a b.txt": "space in the name",
		"scratch.tmp":   "excluded",
	})
	if _, err := s3.AWS(t, "s3", "sync", src, "s3://"+bucket+"/data/"); err != nil {
		t.Fatal(err)
	}
	base := []any{"from", "s3://" + bucket + "/data", "to", "~/data", "endpoint_url", s3.Endpoint, "region", s3.Region, "exclude", []string{"*.tmp"}}
	tests := map[string]struct {
		with      []any
		secretKey string
		wantClass string
		wantMsg   string
	}{
		"staged": {},
		"wrong secret key": {
			secretKey: "fake-wrong-secret-0123456789",
			wantClass: ClassDownloadFailed, wantMsg: "failed (exit code",
		},
		"no such bucket": {
			with:      []any{"from", "s3://" + bucket + "-none/data"},
			wantClass: ClassDownloadFailed, wantMsg: "failed (exit code",
		},
		"empty prefix": {
			with:      []any{"from", "s3://" + bucket + "/nothing-here"},
			wantClass: ClassDownloadFailed, wantMsg: "holds no objects",
		},
		"destination not writable": {
			with:      []any{"to", "~/blocker/data"},
			wantClass: ClassDownloadFailed, wantMsg: "cannot be written",
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
			writeTree(t, e.inst.Ref, map[string]string{"blocker": "a file"})
			w := with(merge(base, tt.with)...)
			do := func() (*logBuf, error) {
				log := &logBuf{}
				err := e.steps.Do(context.Background(), Request{NodeID: "stage@a", Step: &plan.Step{ID: "stage", Uses: plan.KindDownloadS3}, Instance: e.inst, With: w, Log: log})
				for what, s := range map[string]string{"log": log.String(), "error": errString(err)} {
					if strings.Contains(s, secretKey) {
						t.Errorf("the %s holds the secret key:\n%s", what, s)
					}
				}
				return log, err
			}
			log, err := do()
			if tt.wantClass != "" {
				se := stepError(t, err)
				if se.Class != tt.wantClass || !strings.Contains(se.Msg, tt.wantMsg) {
					t.Errorf("error = %v, want class %q with %q\nlog:\n%s", err, tt.wantClass, tt.wantMsg, log)
				}
				return
			}
			if err != nil {
				t.Fatalf("download: %v\n%s", err, log)
			}
			data := filepath.Join(e.inst.Ref, "data")
			for name, want := range map[string]string{"train/a.bin": strings.Repeat("a", 3000), "notes/a b.txt": "space in the name"} {
				if b, err := os.ReadFile(filepath.Join(data, name)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v", name, b, err)
				}
			}
			if _, err := os.Stat(filepath.Join(data, "scratch.tmp")); err == nil {
				t.Errorf("an excluded object was downloaded")
			}
			if !strings.Contains(log.String(), "2 files (3017 bytes)") || !strings.Contains(log.String(), "verified") {
				t.Errorf("the log does not say what it verified:\n%s", log)
			}
			// A second run (a resume) downloads nothing again: the file
			// keeps its inode (the AWS CLI writes a new file and renames
			// it over the old one when it downloads).
			ino := func() uint64 {
				fi, err := os.Stat(filepath.Join(data, "train", "a.bin"))
				if err != nil {
					t.Fatal(err)
				}
				return fi.Sys().(*syscall.Stat_t).Ino
			}
			before := ino()
			if log, err := do(); err != nil {
				t.Fatalf("second download: %v\n%s", err, log)
			}
			if ino() != before {
				t.Errorf("the second download copied train/a.bin again")
			}
		})
	}
}

// TestDownloadFile stages a directory of a shared filesystem in (file://),
// links copied as links, and reports a missing source.
func TestDownloadFile(t *testing.T) {
	e := newEnv(t)
	shared := t.TempDir()
	writeTree(t, shared, map[string]string{"a/x.txt": "x", "b b.txt": "bb"})
	if err := os.Symlink("/etc/hostname", filepath.Join(shared, "link")); err != nil {
		t.Fatal(err)
	}
	do := func(from string) (*logBuf, error) {
		log := &logBuf{}
		err := e.steps.Do(context.Background(), Request{NodeID: "stage@a", Step: &plan.Step{ID: "stage", Uses: plan.KindDownloadS3}, Instance: e.inst,
			With: with("from", from, "to", "~/data"), Log: log})
		return log, err
	}
	if log, err := do("file://" + shared); err != nil {
		t.Fatalf("download: %v\n%s", err, log)
	}
	if b, err := os.ReadFile(filepath.Join(e.inst.Ref, "data", "b b.txt")); err != nil || string(b) != "bb" {
		t.Errorf("b b.txt: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(e.inst.Ref, "data", "link")); err != nil || l != "/etc/hostname" {
		t.Errorf("link: %q, %v", l, err)
	}
	_, err := do("file://" + shared + "/none")
	if se := stepError(t, err); se.Class != ClassDownloadFailed || !strings.Contains(se.Msg, "is not a directory") {
		t.Errorf("missing source: %v", err)
	}
}
