package steps

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// downloadParams reads a download-s3 step's with: the script's parameters,
// the secrets the AWS CLI gets, and the exclude matchers.
func (s *Steps) downloadParams(req Request) (Params, []string, []*regexp.Regexp, error) {
	from, to := withString(req.With, "from"), withString(req.With, "to")
	if from == "" || to == "" {
		return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: "download-s3 needs with.from and with.to"}
	}
	if err := confinedPaths(req, "from", "to"); err != nil {
		return nil, nil, nil, err
	}
	patterns := withList(req.With, "exclude")
	for _, p := range patterns {
		if strings.ContainsAny(p, "\r\n") {
			return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.exclude: %q holds a line break", p)}
		}
	}
	excludes, err := excludeMatchers(patterns)
	if err != nil {
		return nil, nil, nil, err
	}
	p := Params{"dst": to, "excludes": strings.Join(patterns, "\n"), "bucket": "", "prefix": "", "endpoint": "", "region": ""}
	for _, k := range []string{"endpoint_url", "region"} {
		v := withString(req.With, k)
		if strings.HasPrefix(v, "-") {
			return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q is not a valid value", k, v)}
		}
		p[strings.TrimSuffix(k, "_url")] = v
	}
	switch {
	case strings.HasPrefix(from, "s3://"):
		rest := strings.TrimPrefix(from, "s3://")
		bucket, prefix, _ := strings.Cut(rest, "/")
		prefix = strings.Trim(prefix, "/")
		if bucket == "" || strings.ContainsAny(bucket, " \t\r\n") || strings.HasPrefix(bucket, "-") {
			return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.from %q names no bucket (s3://BUCKET/PREFIX)", from)}
		}
		if prefix != "" {
			prefix += "/"
		}
		p["bucket"], p["prefix"], p["src"] = bucket, prefix, "s3://"+bucket+"/"+prefix
	case strings.HasPrefix(from, "file://"):
		dir := strings.TrimPrefix(from, "file://")
		if !strings.HasPrefix(dir, "/") {
			return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.from %q: a file:// source is a directory of the instance, given as an absolute path (file:///shared/data)", from)}
		}
		p["src"] = dir
	default:
		return nil, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.from %q must start with s3:// or file://", from)}
	}
	var secrets []string
	if strings.HasPrefix(from, "s3://") {
		secrets = withList(req.With, "env")
		if secrets == nil {
			secrets = defaultAWSEnv
		}
	}
	return p, secrets, excludes, nil
}

// download stages with.from in to with.to on the instance (download.sh:
// aws s3 sync, so what is there already is not copied again), then checks
// the copy. When the sync copied something from s3://, its own report is
// what is checked, so that no second AWS CLI process lists the bucket:
// sync lists both sides and copies every object the destination lacks or
// holds with another size (the AWS CLI fails a download that ends short),
// and each object it says it copied must then be a file in the
// destination. When it copied nothing (a resume, or an empty prefix), or
// a line of its report cannot be read (a key with a line break), the
// bucket is listed and every object checked with its size, as a file://
// source always is. Files the destination held before and the source
// does not are left alone.
func (s *Steps) download(ctx context.Context, req Request) error {
	params, names, excludes, err := s.downloadParams(req)
	if err != nil {
		return err
	}
	prelude, secrets, err := s.secretEnv(names)
	if err != nil {
		return err
	}
	inst := req.Instance
	from, to := withString(req.With, "from"), withString(req.With, "to")
	fmt.Fprintf(req.Log, "staging %s in to %s on %s\n", from, to, inst.Name)
	params["list"] = ""
	out, err := s.downloadScript(ctx, req, prelude+script(params, "download"), secrets)
	if err != nil {
		return err
	}
	if params["bucket"] != "" {
		copied, dst, ok := splitCopied(out)
		if !ok {
			return s.fail(ClassDownloadFailed, nil, "the download script on %s did not print what it copied", inst.Name)
		}
		got, readable := parseCopied(copied, params["src"])
		if readable && len(got) > 0 {
			return s.checkCopied(req, got, parseSource(dst, nil))
		}
		// Nothing copied (a resume, or an empty prefix), or a line the
		// sync printed could not be read: list the bucket.
		params["list"] = "1"
		if out, err = s.downloadScript(ctx, req, prelude+script(params, "download"), secrets); err != nil {
			return err
		}
	}
	srcOut, dstOut, ok := splitSections(out)
	if !ok {
		return s.fail(ClassDownloadFailed, nil, "the download script on %s did not print its listings", inst.Name)
	}
	var src map[string]int64
	if params["bucket"] != "" {
		if src, err = parseObjects(srcOut, params["prefix"]); err != nil {
			return s.fail(ClassDownloadFailed, err, "listing %s: %v", from, err)
		}
		for k := range src {
			if matchesAny(excludes, k) {
				delete(src, k)
			}
		}
		delete(src, "") // the prefix's own "directory" marker
	} else {
		src = parseSource(srcOut, excludes)
	}
	dst := parseSource(dstOut, nil)
	files, bytes := totals(src)
	if len(src) == 0 && params["bucket"] != "" {
		return s.fail(ClassDownloadFailed, nil, "%s holds no objects (is the bucket or prefix right?)", from)
	}
	for _, k := range sortedKeys(src) {
		n, ok := dst[k]
		switch {
		case !ok:
			return s.fail(ClassMismatch, nil, "%s holds %d files (%d bytes), but %s on %s lacks %s", from, files, bytes, to, inst.Name, k)
		case n != src[k]:
			return s.fail(ClassMismatch, nil, "%s on %s has %d bytes, but %s has %d", k, inst.Name, n, from, src[k])
		}
	}
	fmt.Fprintf(req.Log, "%s holds the %d files (%d bytes) of %s; verified\n", to, files, bytes, from)
	return nil
}

// downloadScript runs download.sh and returns its stdout, or the step's
// error for its exit code.
func (s *Steps) downloadScript(ctx context.Context, req Request, sc string, secrets []byte) ([]byte, error) {
	inst := req.Instance
	from, to := withString(req.With, "from"), withString(req.With, "to")
	res, err := s.exec(ctx, inst, sc, secrets)
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case err != nil:
		return nil, s.fail(ClassDownloadFailed, err, "downloading %s to %s: %v", from, inst.Name, err)
	case res.ExitCode == exitNoPath:
		return nil, s.fail(ClassDownloadFailed, nil, "%s is not a directory on %s", strings.TrimPrefix(from, "file://"), inst.Name)
	case res.ExitCode == exitNoAWS:
		return nil, s.fail(ClassDownloadFailed, nil, "the AWS CLI (aws) is not installed on %s", inst.Name)
	case res.ExitCode == exitNoSecret:
		return nil, s.fail(ClassDownloadFailed, nil, "downloading %s on %s: the credentials did not arrive on stdin", from, inst.Name)
	case res.ExitCode == exitNoWrite:
		return nil, s.fail(ClassDownloadFailed, nil, "%s on %s cannot be written: %s", to, inst.Name, s.lastLine(res.Stderr))
	case res.ExitCode != 0:
		return nil, s.fail(ClassDownloadFailed, nil, "downloading %s to %s on %s failed (exit code %d)%s: %s", from, to, inst.Name, res.ExitCode, diskFull(res.Stderr, "the instance's"), s.lastLine(res.Stderr))
	}
	return res.Stdout, nil
}

// checkCopied checks a sync's report against the destination's listing
// (path → size): every object the sync copied is a file there.
func (s *Steps) checkCopied(req Request, copied []string, dst map[string]int64) error {
	from, to, inst := withString(req.With, "from"), withString(req.With, "to"), req.Instance
	var bytes int64
	for _, k := range copied {
		n, ok := dst[k]
		if !ok {
			return s.fail(ClassMismatch, nil, "aws s3 sync copied %d files from %s, but %s on %s lacks %s", len(copied), from, to, inst.Name, k)
		}
		bytes += n
	}
	fmt.Fprintf(req.Log, "aws s3 sync copied %d files (%d bytes) from %s, each now a file in %s; verified\n", len(copied), bytes, from, to)
	return nil
}

// parseCopied reads the keys (less the source prefix src,
// "s3://BUCKET/PREFIX/") of the objects an aws s3 sync reports it copied:
// lines "download: s3://BUCKET/PREFIX/KEY to DEST", where DEST is the
// destination path of KEY relative to the sync's working directory, so it
// ends with KEY (which may itself hold " to "). readable is false when a
// line is not of that form (a key with a line break spans lines).
func parseCopied(out []byte, src string) (keys []string, readable bool) {
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, "download: "+src)
		if !ok {
			return nil, false
		}
		key := ""
		for i := 0; ; {
			j := strings.Index(rest[i:], " to ")
			if j < 0 {
				return nil, false
			}
			k, dest := rest[:i+j], rest[i+j+len(" to "):]
			if k != "" && (dest == k || strings.HasSuffix(dest, "/"+k)) {
				key = k
				break
			}
			i += j + 1
		}
		if !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys, true
}

// splitCopied splits download.sh's output at "@@copied" and "@@dest".
func splitCopied(out []byte) (copied, dst []byte, ok bool) {
	i := bytes.Index(out, []byte("@@copied\n"))
	j := bytes.LastIndex(out, []byte("\n@@dest\n"))
	if i < 0 || j < i {
		return nil, nil, false
	}
	return out[i+len("@@copied\n") : j], out[j+len("\n@@dest\n"):], true
}

// splitSections splits download.sh's output at "@@source" and "@@dest".
func splitSections(out []byte) (src, dst []byte, ok bool) {
	i := bytes.Index(out, []byte("@@source\n"))
	j := bytes.LastIndex(out, []byte("\n@@dest\n"))
	if i < 0 || j < i {
		return nil, nil, false
	}
	return out[i+len("@@source\n") : j], out[j+len("\n@@dest\n"):], true
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
