package testrig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	img := BuildTrainerImage(t, "")
	r := StartRegistry(t)
	label := "taoflow.testrig=" + UniqueName(t)
	NoLeftovers(t, label)

	// Sequential steps over one registry: each relies on the one before.
	t.Run("wrong password is refused", func(t *testing.T) {
		err := r.Login(t, t.TempDir(), "fake-wrong-password")
		if err == nil {
			t.Fatal("login with a wrong password succeeded")
		}
		if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("error does not say unauthorized: %v", err)
		}
	})
	t.Run("right password logs in", func(t *testing.T) {
		dir := t.TempDir()
		if err := r.Login(t, dir, r.Password); err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), r.Addr) {
			t.Errorf("config.json has no entry for %s", r.Addr)
		}
	})

	ref := r.Push(t, img)
	if want := r.Addr + "/taoflow/trainer:test"; ref != want {
		t.Errorf("Push returned %s, want %s", ref, want)
	}
	// Drop the local copy so every pull below must reach the registry.
	if _, err := Docker(t, "rmi", ref); err != nil {
		t.Fatal(err)
	}

	t.Run("pull without credentials is refused", func(t *testing.T) {
		out, err := DockerEnv(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, nil, "pull", ref)
		if err == nil {
			t.Fatalf("anonymous pull succeeded:\n%s", out)
		}
		msg := strings.ToLower(err.Error())
		if !strings.Contains(msg, "no basic auth credentials") && !strings.Contains(msg, "unauthorized") {
			t.Errorf("error does not say the pull was unauthorised: %v", err)
		}
		if _, err := Docker(t, "image", "inspect", ref); err == nil {
			t.Error("image exists locally after a refused pull")
		}
	})
	t.Run("pull with credentials works and the image runs", func(t *testing.T) {
		if _, err := DockerEnv(t, []string{"DOCKER_CONFIG=" + r.DockerConfig}, nil, "pull", ref); err != nil {
			t.Fatal(err)
		}
		out, err := Docker(t, "run", "--rm", "--label", label, ref, "-epochs", "1", "-sleep", "1ms", "-results", "/tmp/r")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "trainer: done") {
			t.Errorf("output lacks the trainer's last line:\n%s", out)
		}
	})
	t.Run("logout forgets the credentials", func(t *testing.T) {
		r.Logout(t)
		cfg, err := os.ReadFile(filepath.Join(r.DockerConfig, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cfg), r.Addr) {
			t.Errorf("config.json still names %s after logout:\n%s", r.Addr, cfg)
		}
	})
}

func TestImageTag(t *testing.T) {
	cases := map[string]struct{ ref, want string }{
		"name and tag":        {"taoflow-trainer:test", "test"},
		"no tag":              {"taoflow-trainer", "latest"},
		"registry with port":  {"127.0.0.1:5000/a/b", "latest"},
		"registry port & tag": {"127.0.0.1:5000/a/b:v1", "v1"},
		"digest":              {"a/b:v2@sha256:abc", "v2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := imageTag(tc.ref); got != tc.want {
				t.Errorf("imageTag(%q) = %q, want %q", tc.ref, got, tc.want)
			}
		})
	}
}
