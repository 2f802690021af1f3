package steps

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/shellquote"
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

// TestDownloadS3Verify shows what verifies a download-s3 against a real
// S3 server (versitygw) and the real AWS CLI, wrapped where a fault must
// come after the sync: a file short in the destination before the run is
// copied again (sync compares sizes); a file the sync reported copying but
// that is not there, and, on a run where the sync copied nothing, a file
// shorter than its object, are mismatches.
func TestDownloadS3Verify(t *testing.T) {
	s3 := testrig.StartS3(t)
	bucket := testrig.UniqueName(t)
	s3.CreateBucket(t, bucket)
	src := t.TempDir()
	content := map[string]string{"train/a.bin": strings.Repeat("a", 3000), "train/b.bin": strings.Repeat("b", 2000)}
	writeTree(t, src, content)
	if _, err := s3.AWS(t, "s3", "sync", src, "s3://"+bucket+"/data/"); err != nil {
		t.Fatal(err)
	}
	realAWS, err := exec.LookPath("aws")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		before    map[string]string // in the destination before the run
		after     string            // shell run after a successful sync; $4 is the destination
		wantClass string
		wantMsg   string
	}{
		"short before the run": {before: map[string]string{"train/a.bin": "short"}},
		"missing after the sync": {
			after:     `rm -f "$4/train/a.bin"`,
			wantClass: ClassMismatch, wantMsg: "aws s3 sync copied 2 files from s3://" + bucket + "/data, but ~/data on a lacks train/a.bin",
		},
		"short after a sync that copied nothing": {
			before:    content,
			after:     `printf x >"$4/train/b.bin"`,
			wantClass: ClassMismatch, wantMsg: "train/b.bin on a has 1 bytes, but s3://" + bucket + "/data has 2000",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.Secrets = testSecrets(t, "AWS_ACCESS_KEY_ID", s3.AccessKey, "AWS_SECRET_ACCESS_KEY", s3.SecretKey)
			})
			data := filepath.Join(e.inst.Ref, "data")
			if tt.before != nil {
				writeTree(t, data, tt.before)
				// Not newer than the objects, as a copy from a run before
				// (the AWS CLI gives a download its object's time, and
				// copies again a file newer than its object).
				old := time.Now().Add(-time.Hour)
				for name := range tt.before {
					if err := os.Chtimes(filepath.Join(data, name), old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.after != "" {
				bin := t.TempDir()
				wrapper := "#!/bin/sh\n" + shellquote.Quote(realAWS) + " \"$@\" || exit\n[ \"$1 $2\" = 's3 sync' ] || exit 0\n" + tt.after + "\n"
				if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(wrapper), 0o755); err != nil {
					t.Fatal(err)
				}
				t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			log := &logBuf{}
			err := e.steps.Do(context.Background(), Request{NodeID: "stage@a", Step: &plan.Step{ID: "stage", Uses: plan.KindDownloadS3}, Instance: e.inst,
				With: with("from", "s3://"+bucket+"/data", "to", "~/data", "endpoint_url", s3.Endpoint, "region", s3.Region), Log: log})
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
			for name, want := range content {
				if b, err := os.ReadFile(filepath.Join(data, name)); err != nil || string(b) != want {
					t.Errorf("%s: %d bytes, %v; want %d", name, len(b), err, len(want))
				}
			}
		})
	}
}

func TestParseCopied(t *testing.T) {
	const src = "s3://b/data/"
	tests := map[string]struct {
		out      string
		want     []string
		readable bool
	}{
		"none":                {out: "", readable: true},
		"relative dests":      {out: "download: s3://b/data/x/y.json to ../dst/x/y.json\ndownload: s3://b/data/top to ./top\n", want: []string{"top", "x/y.json"}, readable: true},
		"key with ' to '":     {out: "download: s3://b/data/sub/a to b.txt to sub/a to b.txt\n", want: []string{"sub/a to b.txt"}, readable: true},
		"line break in a key": {out: "download: s3://b/data/a\nb to d/a\nb\n"},
		"another prefix":      {out: "download: s3://b/other/x to d/x\n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, readable := parseCopied([]byte(tt.out), src)
			if readable != tt.readable || !slices.Equal(got, tt.want) {
				t.Errorf("parseCopied = %q, %v; want %q, %v", got, readable, tt.want, tt.readable)
			}
		})
	}
}
