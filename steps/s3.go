package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/platform"
)

// Exit codes of the S3 scripts (besides exitNoSource and exitNoSecret).
const (
	exitNoAWS = 83 // the AWS CLI is not installed on the instance
)

// awsPartial is the exit code of aws s3 sync when it skipped some files
// (unreadable, dangling symlinks) and copied the rest: the verification
// then tells whether anything that counts is missing.
const awsPartial = 2

// defaultAWSEnv are the secrets the AWS CLI gets when with.env is absent.
var defaultAWSEnv = plan.DefaultAWSSecrets

// s3Dest is an upload's destination and how to reach it.
type s3Dest struct {
	Bucket string
	Prefix string // "" or ending in /
	// Opts are the AWS CLI's options for every call (flag, value, ...).
	Opts []string
}

// URL is the destination directory as the AWS CLI takes it.
func (d s3Dest) URL() string { return "s3://" + d.Bucket + "/" + d.Prefix }

// parseS3 splits s3://bucket/prefix.
func parseS3(to string) (bucket, prefix string, err error) {
	rest := strings.TrimPrefix(to, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" || strings.ContainsAny(bucket, " \t\r\n") || strings.HasPrefix(bucket, "-") {
		return "", "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q names no bucket (s3://BUCKET/PREFIX)", to)}
	}
	if prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// awsScript is an S3 script: scripts/aws-check.sh (the AWS CLI must be
// there, and must not page its output), then the named scripts.
func awsScript(params Params, names ...string) string {
	params["tf_exit_noaws"] = strconv.Itoa(exitNoAWS)
	return script(params, append([]string{"aws-check"}, names...)...)
}

// syncScript copies from (on the instance) to dest with aws s3 sync
// (scripts/s3-sync.sh). A manifest at the top of the source is left out:
// the upload writes its own.
func syncScript(from string, dest s3Dest, excludes []string) string {
	return awsScript(Params{
		"tf_src":           from,
		"tf_url":           dest.URL(),
		"tf_manifest":      manifestName,
		"tf_excludes":      words(excludes...),
		"tf_opts":          words(dest.Opts...),
		"tf_exit_nosource": strconv.Itoa(exitNoSource),
	}, "home", "s3-sync")
}

// sourceScript lists the regular files under from (not through symlinks,
// which aws s3 sync --no-follow-symlinks skips) as "SIZE PATH\0" records
// (scripts/s3-source.sh).
func sourceScript(from string) string {
	return script(Params{"tf_src": from, "tf_exit_nosource": strconv.Itoa(exitNoSource)}, "home", "s3-source")
}

// listScript lists the objects under dest as list-objects-v2 JSON
// (scripts/s3-list.sh).
func listScript(dest s3Dest) string {
	return awsScript(Params{"tf_bucket": dest.Bucket, "tf_prefix": dest.Prefix, "tf_opts": words(dest.Opts...)}, "s3-list")
}

// putScript writes body, carried in the script itself (stdin is for
// secrets only: brev exec has none), to dest's manifest
// (scripts/s3-put.sh).
func putScript(dest s3Dest, body []byte) string {
	return awsScript(Params{"tf_body": string(body), "tf_url": dest.URL() + manifestName, "tf_opts": words(dest.Opts...)}, "s3-put")
}

// s3Target reads the S3 destination of an upload-s3 step: the bucket and
// prefix of to with the endpoint and region options, and the exclude
// patterns as written and as matchers.
func s3Target(w *plan.Value, to string) (s3Dest, []string, []*regexp.Regexp, error) {
	bucket, prefix, err := parseS3(to)
	if err != nil {
		return s3Dest{}, nil, nil, err
	}
	dest := s3Dest{Bucket: bucket, Prefix: prefix}
	for _, o := range []struct{ key, flag string }{{"endpoint_url", "--endpoint-url"}, {"region", "--region"}} {
		v := withString(w, o.key)
		if strings.HasPrefix(v, "-") {
			return s3Dest{}, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q is not a valid value", o.key, v)}
		}
		if v != "" {
			dest.Opts = append(dest.Opts, o.flag, v)
		}
	}
	excludes := withList(w, "exclude")
	var match []*regexp.Regexp
	for _, p := range excludes {
		re, err := fnmatchRE(p)
		if err != nil {
			return s3Dest{}, nil, nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.exclude: %q: %v", p, err)}
		}
		match = append(match, re)
	}
	return dest, excludes, match, nil
}

// uploadS3 syncs from to an s3:// destination with the AWS CLI on the
// instance, verifies the copy against a listing of the destination (every
// file, by relative path and size; excludes respected), and writes the
// manifest next to it. Credentials are secrets (with.env) exported for
// each command from stdin. A failure is not retried here: the engine
// retries the step.
func (s *Steps) uploadS3(ctx context.Context, req Request, from, to string, verify bool) error {
	dest, excludes, match, err := s3Target(req.With, to)
	if err != nil {
		return err
	}
	names := withList(req.With, "env")
	if names == nil {
		names = defaultAWSEnv
	}
	prelude, secrets, err := s.secretEnv(names)
	if err != nil {
		return err
	}
	inst := req.Instance
	fmt.Fprintf(req.Log, "syncing %s on %s to %s\n", from, inst.Name, dest.URL())
	res, err := s.exec(ctx, inst, prelude+syncScript(from, dest, excludes), secrets)
	if err := s.awsFailed(ctx, inst, "aws s3 sync", from, res, err, awsPartial); err != nil {
		return err
	}
	s.logOutput(req, res.Stdout, res.Stderr)
	if res.ExitCode == awsPartial {
		fmt.Fprintf(req.Log, "aws s3 sync skipped some files (exit code %d); verifying what counts\n", awsPartial)
	}

	res, err = s.exec(ctx, inst, sourceScript(from), nil)
	if err := s.awsFailed(ctx, inst, "listing", from, res, err); err != nil {
		return err
	}
	src := parseSource(res.Stdout, match)
	files, bytes := totals(src)
	if verify {
		res, err = s.exec(ctx, inst, prelude+listScript(dest), secrets)
		if err := s.awsFailed(ctx, inst, "aws s3api list-objects-v2", from, res, err); err != nil {
			return err
		}
		dst, err := parseObjects(res.Stdout, dest.Prefix)
		if err != nil {
			return s.fail(ClassUploadFailed, err, "listing %s: %v", dest.URL(), err)
		}
		dfiles, dbytes := totals(dst)
		fmt.Fprintf(req.Log, "source: %d files, %d bytes; destination: %d objects, %d bytes\n", files, bytes, dfiles, dbytes)
		if diff := firstDifference(src, dst); diff != "" {
			return s.fail(ClassMismatch, nil, "%s holds %d files (%d bytes) but %s holds %d objects (%d bytes): %s", from, files, bytes, dest.URL(), dfiles, dbytes, diff)
		}
	}

	m := s.manifest(req, from, to, files, bytes)
	m.SHA256 = s.checksums(ctx, req, from, func(p string) bool { _, ok := src[p]; return ok })
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return s.fail(ClassUploadFailed, err, "manifest: %v", err)
	}
	body = append(s.redact.RedactBytes(body), '\n')
	res, err = s.exec(ctx, inst, prelude+putScript(dest, body), secrets)
	if err := s.awsFailed(ctx, inst, "writing "+manifestName+" with aws s3 cp", from, res, err); err != nil {
		return err
	}
	fmt.Fprintf(req.Log, "uploaded %d files (%d bytes) to %s; wrote %s\n", files, bytes, dest.URL(), manifestName)
	return nil
}

// awsFailed turns a failed S3 script into an upload failure; exit codes in
// ok count as success.
func (s *Steps) awsFailed(ctx context.Context, inst platform.Instance, what, from string, res platform.Result, err error, ok ...int) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassUploadFailed, err, "%s on %s: %v", what, inst.Name, err)
	case res.ExitCode == 0 || slices.Contains(ok, res.ExitCode):
		return nil
	case res.ExitCode == exitNoSource:
		return s.fail(ClassUploadFailed, nil, "%s on %s is not a directory (did the job write its results there?)", from, inst.Name)
	case res.ExitCode == exitNoAWS:
		return s.fail(ClassUploadFailed, nil, "the AWS CLI (aws) is not installed on %s", inst.Name)
	case res.ExitCode == exitNoSecret:
		return s.fail(ClassUploadFailed, nil, "%s on %s: the credentials did not arrive on stdin", what, inst.Name)
	}
	return s.fail(ClassUploadFailed, nil, "%s on %s failed (exit code %d): %s", what, inst.Name, res.ExitCode, s.lastLine(res.Stderr))
}

// parseSource reads sourceScript's records into path → size, leaving out
// the manifest at the top and the paths an exclude pattern matches.
func parseSource(out []byte, excludes []*regexp.Regexp) map[string]int64 {
	files := map[string]int64{}
next:
	for _, rec := range bytes.Split(out, []byte{0}) {
		sz, path, ok := strings.Cut(string(rec), " ")
		n, err := strconv.ParseInt(sz, 10, 64)
		if !ok || err != nil || path == "" || path == manifestName {
			continue
		}
		for _, re := range excludes {
			if re.MatchString(path) {
				continue next
			}
		}
		files[path] = n
	}
	return files
}

// parseObjects reads list-objects-v2 JSON into key (less prefix) → size,
// leaving out the manifest at the top. The AWS CLI prints nothing for an
// empty listing.
func parseObjects(out []byte, prefix string) (map[string]int64, error) {
	objs := map[string]int64{}
	if len(bytes.TrimSpace(out)) == 0 {
		return objs, nil
	}
	var resp struct {
		Contents []struct {
			Key  string
			Size int64
		}
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("unreadable listing: %w", err)
	}
	for _, o := range resp.Contents {
		k := strings.TrimPrefix(o.Key, prefix)
		if k == manifestName || strings.HasSuffix(o.Key, "/") && o.Size == 0 {
			continue // ours, or a "directory" marker
		}
		objs[k] = o.Size
	}
	return objs, nil
}

func totals(m map[string]int64) (files, bytes int64) {
	for _, n := range m {
		files++
		bytes += n
	}
	return files, bytes
}

// firstDifference names the first file (in path order) that differs
// between source and destination, or "".
func firstDifference(src, dst map[string]int64) string {
	var keys []string
	for k := range src {
		keys = append(keys, k)
	}
	for k := range dst {
		if _, ok := src[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, inSrc := src[k]
		b, inDst := dst[k]
		switch {
		case !inDst:
			return fmt.Sprintf("%s is missing", k)
		case !inSrc:
			return fmt.Sprintf("%s is there but not in the source", k)
		case a != b:
			return fmt.Sprintf("%s has %d bytes, want %d", k, b, a)
		}
	}
	return ""
}

// fnmatchRE translates an exclude pattern the way the AWS CLI matches it
// (Python's fnmatch against the path relative to the source: * and ? also
// match /, [seq] and [!seq] are character classes).
func fnmatchRE(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(pat) && pat[j] == '!' {
				j++
			}
			if j < len(pat) && pat[j] == ']' {
				j++
			}
			for j < len(pat) && pat[j] != ']' {
				j++
			}
			if j >= len(pat) {
				b.WriteString(`\[`)
				continue
			}
			set := pat[i+1 : j]
			i = j
			neg := strings.HasPrefix(set, "!")
			if neg {
				set = set[1:]
			}
			b.WriteByte('[')
			if neg {
				b.WriteByte('^')
			}
			for k := 0; k < len(set); k++ {
				switch set[k] {
				case '\\', '[', ']', '^':
					b.WriteByte('\\')
				}
				b.WriteByte(set[k])
			}
			b.WriteByte(']')
		default:
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}
