package testrig

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultTrainerTag is the tag BuildTrainerImage uses for an empty tag.
const DefaultTrainerTag = "taoflow-trainer:test"

// TestLabel is the label (key=value) put on every image the rig builds.
// Containers inherit image labels, so it does not tell one test's
// containers from another's: label those with a UniqueName.
const TestLabel = "taoflow.test=1"

// build is one image build, shared by every test of the binary.
type build struct {
	once sync.Once
	err  error
}

var builds sync.Map // tag → *build

// BuildTrainerImage builds the trainer (./internal/testrig/trainer, static,
// CGO_ENABLED=0) into a FROM-scratch image with ENTRYPOINT ["/trainer"],
// tags it tag (DefaultTrainerTag when empty), labels it TestLabel and
// returns the tag. It builds once per test binary and tag; later calls
// return at once (or fail the same way). The image is left in place for
// the next test binary: rebuilding identical sources hits Docker's cache,
// and an image the new build replaces is removed when nothing uses it.
func BuildTrainerImage(t testing.TB, tag string) string {
	t.Helper()
	if tag == "" {
		tag = DefaultTrainerTag
	}
	docker := tool(t, "docker")
	goBin := tool(t, "go") // go test puts GOROOT/bin first in PATH
	v, _ := builds.LoadOrStore(tag, &build{})
	b := v.(*build)
	b.once.Do(func() {
		start := time.Now()
		b.err = buildImage(docker, goBin, tag)
		if b.err == nil {
			t.Logf("testrig: built image %s in %s", tag, time.Since(start).Round(time.Millisecond))
		}
	})
	if b.err != nil {
		t.Fatalf("testrig: building image %s: %v", tag, b.err)
	}
	return tag
}

func buildImage(docker, goBin, tag string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	ctxDir, err := os.MkdirTemp("", "testrig-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ctxDir)

	goEnv := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH, "GOFLAGS=-buildvcs=false"}
	if _, err := commandIn(root, goEnv, nil, goBin, "build", "-trimpath", "-o", filepath.Join(ctxDir, "trainer"), "./internal/testrig/trainer"); err != nil {
		return err
	}
	dockerfile := "FROM scratch\nCOPY trainer /trainer\nENTRYPOINT [\"/trainer\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}

	// The classic builder works with every engine; BuildKit needs the
	// buildx plugin, which a distribution's docker client may lack.
	var env []string
	if _, err := command(nil, nil, docker, "buildx", "version"); err != nil {
		env = append(env, "DOCKER_BUILDKIT=0")
	}
	old, _ := command(nil, nil, docker, "image", "inspect", "--format", "{{.Id}}", tag)
	if _, err := command(env, nil, docker, "build", "-q", "--label", TestLabel, "-t", tag, ctxDir); err != nil {
		return err
	}
	now, err := command(nil, nil, docker, "image", "inspect", "--format", "{{.Id}}", tag)
	if err != nil {
		return err
	}
	if old = strings.TrimSpace(old); old != "" && old != strings.TrimSpace(now) {
		// Best effort: a container still using the old image keeps it.
		_, _ = command(nil, nil, docker, "rmi", old)
	}
	return nil
}

// moduleRoot walks up from the working directory (a test runs in its
// package directory) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
