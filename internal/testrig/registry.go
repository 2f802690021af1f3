package testrig

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry is a Docker registry v2 (the distribution registry, Debian's
// docker-registry) on 127.0.0.1 with htpasswd (bcrypt) basic auth and plain
// HTTP; the Docker engine allows that for 127.0.0.0/8 by default.
type Registry struct {
	// Addr is "127.0.0.1:PORT", the registry part of an image reference.
	Addr string
	// User is the one account the registry accepts.
	User string
	// Password is User's password: a fake, random per registry, test-only.
	Password string
	// DockerConfig is a DOCKER_CONFIG directory of this registry's own;
	// Push logs it in. Pass "DOCKER_CONFIG="+DockerConfig to docker to act
	// as the logged-in user without touching ~/.docker.
	DockerConfig string

	loginOnce sync.Once
	loginErr  error
}

// StartRegistry starts a registry with a fresh storage directory and waits
// until /v2/ answers 401. It is stopped by t.Cleanup.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	return StartRegistryUser(t, "taoflow")
}

// StartRegistryUser is StartRegistry with the account named user; "$oauthtoken"
// makes it take logins the way nvcr.io takes an NGC API key.
func StartRegistryUser(t testing.TB, user string) *Registry {
	t.Helper()
	bin := tool(t, "docker-registry")
	htpasswd := tool(t, "htpasswd")
	tool(t, "docker")
	start := time.Now()

	dir := t.TempDir()
	r := &Registry{
		User:         user,
		Password:     "fake-registry-password-" + randomHex(t, 8),
		DockerConfig: filepath.Join(dir, "docker-config"),
	}
	if err := os.Mkdir(r.DockerConfig, 0o700); err != nil {
		t.Fatalf("testrig: %v", err)
	}
	// -i reads the password from stdin, keeping it off htpasswd's argv.
	entry, err := command(nil, strings.NewReader(r.Password), htpasswd, "-niB", r.User)
	if err != nil {
		t.Fatalf("testrig: htpasswd: %v", err)
	}
	htfile := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htfile, []byte(strings.TrimSpace(entry)+"\n"), 0o600); err != nil {
		t.Fatalf("testrig: %v", err)
	}
	storage := filepath.Join(dir, "storage")
	httpSecret := randomHex(t, 16)

	_, addr := startDaemon(t, "docker-registry", dir, func(port int) *exec.Cmd {
		cfg := filepath.Join(dir, fmt.Sprintf("config-%d.yml", port))
		yml := fmt.Sprintf(registryConfig, storage, port, httpSecret, htfile)
		if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
			t.Fatalf("testrig: %v", err)
		}
		return exec.Command(bin, "serve", cfg)
	}, func(addr string) bool {
		return httpStatus("http://"+addr+"/v2/") == http.StatusUnauthorized
	})
	r.Addr = addr
	t.Logf("testrig: registry on %s ready in %s", addr, time.Since(start).Round(time.Millisecond))
	return r
}

// registryConfig is the registry's config.yml: storage dir, port, HTTP
// secret, htpasswd file.
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: 127.0.0.1:%d
  secret: %s
auth:
  htpasswd:
    realm: taoflow-test
    path: %s
`

// Login runs docker login against the registry as r.User with password
// (on stdin), storing credentials in dockerConfig (a DOCKER_CONFIG
// directory). It returns docker's error, for tests of a wrong password.
func (r *Registry) Login(t testing.TB, dockerConfig, password string) error {
	t.Helper()
	_, err := DockerEnv(t, []string{"DOCKER_CONFIG=" + dockerConfig}, strings.NewReader(password),
		"login", r.Addr, "-u", r.User, "--password-stdin")
	return err
}

// Logout removes r's credentials from r.DockerConfig.
func (r *Registry) Logout(t testing.TB) {
	t.Helper()
	if _, err := DockerEnv(t, []string{"DOCKER_CONFIG=" + r.DockerConfig}, nil, "logout", r.Addr); err != nil {
		t.Errorf("testrig: %v", err)
	}
}

// Push logs r.DockerConfig in (once), tags localTag as
// <Addr>/taoflow/trainer:<tag of localTag> and pushes it. It returns that
// reference; t.Cleanup removes the extra local tag.
func (r *Registry) Push(t testing.TB, localTag string) string {
	t.Helper()
	r.loginOnce.Do(func() { r.loginErr = r.Login(t, r.DockerConfig, r.Password) })
	if r.loginErr != nil {
		t.Fatalf("testrig: %v", r.loginErr)
	}
	ref := r.Addr + "/taoflow/trainer:" + imageTag(localTag)
	if _, err := Docker(t, "tag", localTag, ref); err != nil {
		t.Fatalf("testrig: %v", err)
	}
	t.Cleanup(func() {
		if _, err := Docker(t, "image", "inspect", ref); err != nil {
			return // the test removed it already
		}
		if _, err := Docker(t, "rmi", ref); err != nil {
			t.Errorf("testrig: removing tag: %v", err)
		}
	})
	if _, err := DockerEnv(t, []string{"DOCKER_CONFIG=" + r.DockerConfig}, nil, "push", ref); err != nil {
		t.Fatalf("testrig: %v", err)
	}
	return ref
}

// imageTag returns the tag of an image reference, "latest" when it has none.
func imageTag(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[i+1:]
	}
	return "latest"
}

// httpStatus returns the status code of a GET, 0 when there is no answer.
func httpStatus(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testrig: %v", err)
	}
	return hex.EncodeToString(b)
}
