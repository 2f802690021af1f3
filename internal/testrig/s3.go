package testrig

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// S3 is an S3 server (versitygw with its posix backend) on 127.0.0.1,
// plain HTTP, path-style, one root account with fake keys.
type S3 struct {
	// Endpoint is "http://127.0.0.1:PORT", for --endpoint-url.
	Endpoint string
	// AccessKey and SecretKey are the root account's keys: fakes, random
	// per server, test-only.
	AccessKey string
	SecretKey string
	// Region is the region the server signs for, "us-east-1".
	Region string
	// Dir is the posix backend's root: one subdirectory per bucket.
	Dir string

	home string // an empty directory the aws CLI uses for its config
}

// StartS3 starts versitygw (looked up in PATH, then in $(go env GOPATH)/bin)
// on a fresh directory and waits until it answers HTTP. The keys reach it
// through its environment, not its argv. It is stopped by t.Cleanup.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := tool(t, "versitygw", goBinDirs()...)
	tool(t, "aws")
	start := time.Now()

	dir := t.TempDir()
	s := &S3{
		AccessKey: "FAKEACCESS" + strings.ToUpper(randomHex(t, 5)),
		SecretKey: "fake-s3-secret-" + randomHex(t, 12),
		Region:    "us-east-1",
		Dir:       filepath.Join(dir, "data"),
		home:      filepath.Join(dir, "aws-home"),
	}
	for _, d := range []string{s.Dir, s.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatalf("testrig: %v", err)
		}
	}
	_, addr := startDaemon(t, "versitygw", dir, func(port int) *exec.Cmd {
		cmd := exec.Command(bin, "--quiet", "posix", s.Dir)
		cmd.Env = append(os.Environ(),
			"ROOT_ACCESS_KEY_ID="+s.AccessKey,
			"ROOT_SECRET_ACCESS_KEY="+s.SecretKey,
			"VGW_PORT=127.0.0.1:"+strconv.Itoa(port),
			"VGW_REGION="+s.Region,
		)
		return cmd
	}, func(addr string) bool {
		return httpStatus("http://"+addr+"/") != 0
	})
	s.Endpoint = "http://" + addr
	t.Logf("testrig: versitygw on %s ready in %s", addr, time.Since(start).Round(time.Millisecond))
	return s
}

// goBinDirs returns where go install puts binaries: $GOBIN, else each
// $GOPATH/bin, else ~/go/bin.
func goBinDirs() []string {
	if d := os.Getenv("GOBIN"); d != "" {
		return []string{d}
	}
	var dirs []string
	if gp := os.Getenv("GOPATH"); gp != "" {
		for _, p := range filepath.SplitList(gp) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	} else if out, err := command(nil, nil, "go", "env", "GOPATH"); err == nil && strings.TrimSpace(out) != "" {
		for _, p := range filepath.SplitList(strings.TrimSpace(out)) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	return dirs
}

// Env returns the environment for running the aws CLI against this
// server: the keys and region, plus settings that keep the user's own
// ~/.aws files and the EC2 metadata service out of the test. Pass
// --endpoint-url s.Endpoint as well (AWS CLI 2.9 has no AWS_ENDPOINT_URL).
func (s *S3) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_DEFAULT_REGION=" + s.Region,
		"AWS_CONFIG_FILE=" + filepath.Join(s.home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(s.home, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
	}
}

// AWS runs `aws --endpoint-url <Endpoint> args...` with Env and returns
// its stdout; the error carries aws's stderr and exit status.
func (s *S3) AWS(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return command(s.Env(), nil, tool(t, "aws"), append([]string{"--endpoint-url", s.Endpoint}, args...)...)
}

// CreateBucket creates a bucket or fails the test.
func (s *S3) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.AWS(t, "s3api", "create-bucket", "--bucket", name); err != nil {
		t.Fatalf("testrig: %v", err)
	}
}

// List returns the objects under prefix in bucket, key → size in bytes,
// read with `aws s3api list-objects-v2` independently of the code under
// test. An empty listing is an empty map.
func (s *S3) List(t testing.TB, bucket, prefix string) map[string]int64 {
	t.Helper()
	out, err := s.AWS(t, "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix, "--output", "json")
	if err != nil {
		t.Fatalf("testrig: %v", err)
	}
	objects := map[string]int64{}
	if strings.TrimSpace(out) == "" {
		return objects // the CLI prints nothing for an empty listing
	}
	var resp struct {
		Contents []struct {
			Key  string
			Size int64
		}
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("testrig: list-objects-v2 output: %v\n%s", err, out)
	}
	for _, o := range resp.Contents {
		objects[o.Key] = o.Size
	}
	return objects
}
