package steps

import (
	"context"
	"fmt"
	"strings"

	"github.com/taoflow/taoflow/platform"
)

// pullScript pulls image unless the instance has it, then prints its repo
// digests and id as "@digest REPO@sha256:..." and "@id sha256:..." lines
// (scripts/pull.sh). docker pull's own output goes to stdout too, for the
// node log.
func pullScript(image string) string {
	return dockerScript(Params{"tf_image": image}, "pull")
}

// pull makes sure the instance has with.image before a run pays for GPU
// time, and records its digest (Request.Record, and the manifests of later
// uploads from this instance).
func (s *Steps) pull(ctx context.Context, req Request) error {
	image := withString(req.With, "image")
	if err := checkImage("with.image", image); err != nil {
		return err
	}
	if s.onSlurm() {
		return s.slurmPull(ctx, req, image)
	}
	inst := req.Instance
	fmt.Fprintf(req.Log, "pulling %s on %s unless it is there\n", image, inst.Name)
	res, err := s.exec(ctx, inst, pullScript(image), nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "pulling %s on %s: %v", image, inst.Name, err)
	case res.ExitCode == exitNoDockerCLI:
		return s.fail(ClassNoDocker, nil, "docker is not installed on %s", inst.Name)
	}
	var digests []string
	var id string
	present := false
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		switch {
		case l == "@present":
			present = true
		case strings.HasPrefix(l, "@digest "):
			digests = append(digests, strings.TrimSpace(strings.TrimPrefix(l, "@digest ")))
		case strings.HasPrefix(l, "@id "):
			id = strings.TrimSpace(strings.TrimPrefix(l, "@id "))
		case strings.TrimSpace(l) != "":
			fmt.Fprintln(req.Log, l)
		}
	}
	if res.ExitCode != 0 {
		return s.fail(ClassPullFailed, nil, "docker pull %s on %s failed (exit code %d): %s", image, inst.Name, res.ExitCode, s.dockerError(res.Stderr))
	}
	if present {
		fmt.Fprintf(req.Log, "%s is on %s already\n", image, inst.Name)
	}
	digest := pickDigest(image, digests, id)
	if digest == "" {
		return s.fail(ClassPullFailed, nil, "%s on %s: docker image inspect gave no digest or id after the pull", image, inst.Name)
	}
	fmt.Fprintf(req.Log, "image %s: %s\n", image, digest)
	s.noteDigest(inst, image, digest)
	if req.Record != nil {
		req.Record(RecordImage, image)
		req.Record(RecordDigest, digest)
	}
	return nil
}

// pickDigest returns the repo digest of image's repository among digests
// (docker lists one per repository the image came from), else the first,
// else the image id.
func pickDigest(image string, digests []string, id string) string {
	repo := normalRepo(imageRepo(image))
	for _, d := range digests {
		if r, _, ok := strings.Cut(d, "@"); ok && normalRepo(r) == repo {
			return d
		}
	}
	if len(digests) > 0 {
		return digests[0]
	}
	return id
}

// imageRepo strips the tag and digest from an image reference.
func imageRepo(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// normalRepo writes a Docker Hub repository the short way docker lists
// it: docker.io/library/ubuntu is ubuntu.
func normalRepo(repo string) string {
	for _, p := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		repo = strings.TrimPrefix(repo, p)
	}
	return strings.TrimPrefix(repo, "library/")
}

// noteDigest remembers a pulled image's digest on inst.
func (s *Steps) noteDigest(inst platform.Instance, image, digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.digests[inst.Name]
	if m == nil {
		m = map[string]string{}
		s.digests[inst.Name] = m
	}
	m[image] = digest
}

// RememberDigest tells the steps the digest an earlier attempt of the run
// pulled image at on instance (resume), for the manifests of its uploads.
func (s *Steps) RememberDigest(instance, image, digest string) {
	s.noteDigest(platform.Instance{Name: instance}, image, digest)
}

// imagesOn returns a copy of the digests pulled on inst (nil for none).
func (s *Steps) imagesOn(inst platform.Instance) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.digests[inst.Name]) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range s.digests[inst.Name] {
		out[k] = v
	}
	return out
}
