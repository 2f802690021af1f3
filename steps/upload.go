package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/internal/provenance"
)

// manifestName is the file upload-s3 writes next to the results it copied.
const manifestName = "taoflow-run.json"

// Exit codes of the copy script.
const (
	exitNoSource = 80 // with.from is not a directory
	exitCopy     = 81 // mkdir or cp failed
	exitList     = 82 // find failed
)

// Manifest is the content of taoflow-run.json: where the results came from.
// It never holds a secret: vars are plain parameters, and it is redacted
// before it is written anyway.
type Manifest struct {
	RunID        string            `json:"run_id"`
	Plan         string            `json:"plan"`
	PlanHash     string            `json:"plan_hash"`
	Vars         map[string]string `json:"vars"`
	Node         string            `json:"node"`
	Step         string            `json:"step"`
	Cell         *ManifestCell     `json:"cell,omitempty"`
	Instance     string            `json:"instance"`
	InstanceType string            `json:"instance_type,omitempty"`
	// InstanceCost is what the instance had cost when the upload ran, at
	// its type's list price (instances the run created on brev only).
	InstanceCost *ManifestCost `json:"instance_cost,omitempty"`
	// Images are the images pulled on the instance by this run, with
	// their digests.
	Images     map[string]string `json:"images,omitempty"`
	From       string            `json:"from"`
	To         string            `json:"to"`
	Files      int64             `json:"files"`
	Bytes      int64             `json:"bytes"`
	UploadedAt string            `json:"uploaded_at"`
	// RunName and Tags are apply's --name and the run's tags (the plan's
	// and --tag's); Provenance what produced the run (git commit, taoflow
	// version, who ran apply where).
	RunName    string            `json:"run_name,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Provenance *provenance.Info  `json:"provenance,omitempty"`
	// SHA256 is every uploaded file's sha256 by path relative to To
	// (absent where the instance has no sha256sum); `taoflow results
	// --download` checks a download against it.
	SHA256 map[string]string `json:"sha256,omitempty"`
	// LinksLeftOut are the symlinks a fetch did not make, with their
	// targets: those pointing outside the fetched tree (absolute, or
	// climbing above it, directly or through other links).
	LinksLeftOut map[string]string `json:"links_left_out,omitempty"`
	// Partial is set on results a salvage upload or fetch copied after a
	// node before it did not succeed (a budget stop, Ctrl-C, a failed
	// training): they are what the job had written so far. PartialWhy
	// names the node(s) and the cause.
	Partial    bool   `json:"partial,omitempty"`
	PartialWhy string `json:"partial_why,omitempty"`
}

// ManifestCost is the cost estimate of a Manifest's instance: its list
// price, and its uptime and cost from its creation until the upload.
type ManifestCost struct {
	PricePerHour  float64 `json:"price_per_hour"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Cost          float64 `json:"cost"`
	Currency      string  `json:"currency"`
}

// manifestCost reads the price and billing start of an instance's Attrs
// (price_per_hour, billed_from); nil when either is missing.
func manifestCost(attrs map[string]string, now time.Time) *ManifestCost {
	price, err := strconv.ParseFloat(attrs["price_per_hour"], 64)
	if err != nil {
		return nil
	}
	from, err := time.Parse(time.RFC3339Nano, attrs["billed_from"])
	if err != nil {
		return nil
	}
	up := now.Sub(from)
	return &ManifestCost{PricePerHour: price, UptimeSeconds: math.Round(up.Seconds()), Cost: math.Round(price*up.Hours()*10000) / 10000, Currency: "USD"}
}

// ManifestCell is the matrix cell of a Manifest.
type ManifestCell struct {
	ID     string            `json:"id"`
	Index  int               `json:"index"`
	Values map[string]string `json:"values"`
}

// uploadParams reads and checks an upload-s3 step's with: from, to (an
// s3:// destination with its options, or a file:// directory) and verify
// (default true). Every failure is the step's settings, found before
// anything runs (CheckSettings).
func (s *Steps) uploadParams(req Request) (from, to string, verify bool, err error) {
	from, to = withString(req.With, "from"), withString(req.With, "to")
	if from == "" || to == "" {
		return "", "", false, &Error{Class: ClassInvalidConfig, Msg: "upload-s3 needs with.from and with.to"}
	}
	if err := confinedPaths(req, "from", "to"); err != nil {
		return "", "", false, err
	}
	verify, set, err := withBool(req.With, "verify")
	if err != nil {
		return "", "", false, err
	}
	if !set {
		verify = true
	}
	switch {
	case strings.HasPrefix(to, "s3://"):
		if _, _, _, err := s3Target(req.With, to); err != nil {
			return "", "", false, err
		}
		return from, to, verify, nil
	case !strings.HasPrefix(to, "file://"):
		return "", "", false, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q must start with s3:// or file://", to)}
	}
	if len(withList(req.With, "exclude")) > 0 {
		return "", "", false, &Error{Class: ClassUnsupported, Msg: "with.exclude is not supported for file:// destinations yet"}
	}
	if _, err := s.fileTarget(to); err != nil {
		return "", "", false, err
	}
	return from, to, verify, nil
}

// fileTarget is the directory a file:// destination names: an absolute
// path (file:///srv/out). A relative one (file://out, whose "out" a URL
// reader takes for a host) is refused with the forms that work, as
// validate refuses it; it is checked here too for a value only apply knows.
func (s *Steps) fileTarget(to string) (string, error) {
	dest := strings.TrimPrefix(to, "file://")
	if dest == "" {
		return "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q names no path", to)}
	}
	if !filepath.IsAbs(dest) {
		return "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.to %q: a file:// URL takes an absolute path: file:///srv/out, or file://${{ plan.dir }}/out beside a local plan", to)}
	}
	return filepath.Clean(dest), nil
}

// upload copies with.from on the instance to with.to, verifies the copy by
// file count and bytes, and writes the manifest next to it.
func (s *Steps) upload(ctx context.Context, req Request) error {
	from, to, verify, err := s.uploadParams(req)
	if err != nil {
		return err
	}
	if strings.HasPrefix(to, "s3://") {
		return s.uploadS3(ctx, req, from, to, verify)
	}
	dest, err := s.fileTarget(to)
	if err != nil {
		return err
	}
	inst := req.Instance

	fmt.Fprintf(req.Log, "copying %s on %s to %s\n", from, inst.Name, dest)
	res, err := s.exec(ctx, inst, copyScript(from, dest), nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassUploadFailed, err, "copying %s on %s: %v", from, inst.Name, err)
	case res.ExitCode == exitNoSource:
		return s.fail(ClassUploadFailed, nil, "%s on %s is not a directory (did the job write its results there?)", from, inst.Name)
	case res.ExitCode != 0:
		return s.fail(ClassUploadFailed, nil, "copying %s on %s to %s: %s", from, inst.Name, dest, s.lastLine(res.Stderr))
	}
	src, dst, err := parseCounts(res.Stdout)
	if err != nil {
		return s.fail(ClassUploadFailed, err, "copying %s on %s: %v", from, inst.Name, err)
	}
	fmt.Fprintf(req.Log, "source: %d files, %d bytes; destination: %d files, %d bytes\n", src[0], src[1], dst[0], dst[1])
	if verify && src != dst {
		return s.fail(ClassMismatch, nil, "%s holds %d files (%d bytes) but %s holds %d files (%d bytes)", from, src[0], src[1], dest, dst[0], dst[1])
	}

	m := s.manifest(req, from, to, src[0], src[1])
	m.SHA256 = s.checksums(ctx, req, from, nil)
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return s.fail(ClassUploadFailed, err, "manifest: %v", err)
	}
	body = append(s.redact.RedactBytes(body), '\n')
	// The manifest travels inside the script, not on stdin: stdin is for
	// secrets only (brev exec has none).
	res, err = s.exec(ctx, inst, manifestWriteScript(dest, body), nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassUploadFailed, err, "writing %s: %v", manifestName, err)
	case res.ExitCode != 0:
		return s.fail(ClassUploadFailed, nil, "writing %s in %s: %s", manifestName, dest, s.lastLine(res.Stderr))
	}
	fmt.Fprintf(req.Log, "uploaded %d files (%d bytes) to %s; wrote %s\n", src[0], src[1], dest, manifestName)
	return nil
}

// manifestWriteScript writes body (carried in the script: stdin is for
// secrets only) to dest's manifest through a temporary file of an
// unpredictable name, renamed over it (scripts/manifest-write.sh).
func manifestWriteScript(dest string, body []byte) string {
	return script(Params{"tf_dest": dest, "tf_name": manifestName, "tf_body": string(body)}, "manifest-write")
}

// copyScript copies the directory from (on the instance) into dest and
// prints "@src FILES BYTES" and "@dst FILES BYTES" (scripts/copy.sh, which
// says how links are kept from writing anywhere).
func copyScript(from, dest string) string {
	return script(Params{
		"tf_src":           from,
		"tf_dst":           dest,
		"tf_manifest":      manifestName,
		"tf_exit_nosource": strconv.Itoa(exitNoSource),
		"tf_exit_copy":     strconv.Itoa(exitCopy),
		"tf_exit_list":     strconv.Itoa(exitList),
	}, "home", "copy")
}

// parseCounts reads the @src and @dst lines of copyScript.
func parseCounts(out []byte) (src, dst [2]int64, err error) {
	found := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "@src" && f[0] != "@dst") {
			continue
		}
		var c [2]int64
		for i := range 2 {
			if c[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return src, dst, fmt.Errorf("unreadable count %q", line)
			}
		}
		if f[0] == "@src" {
			src = c
		} else {
			dst = c
		}
		found++
	}
	if found != 2 {
		return src, dst, fmt.Errorf("the copy script did not report its counts")
	}
	return src, dst, nil
}

func (s *Steps) manifest(req Request, from, to string, files, bytes int64) Manifest {
	m := Manifest{
		RunID:        s.cfg.RunID,
		Vars:         map[string]string{},
		Node:         req.NodeID,
		Step:         req.Step.ID,
		Instance:     req.Instance.Name,
		InstanceType: req.Instance.Attrs["type"],
		InstanceCost: manifestCost(req.Instance.Attrs, time.Now()),
		Images:       s.imagesOn(req.Instance),
		From:         from,
		To:           to,
		Files:        files,
		Bytes:        bytes,
		UploadedAt:   time.Now().UTC().Format(time.RFC3339),
		RunName:      s.cfg.Record.Name,
		Tags:         s.cfg.Record.Tags,
		Provenance:   s.cfg.Record.Provenance,
	}
	if p := s.cfg.Plan; p != nil {
		m.Plan, m.PlanHash = p.Name, p.Hash
		for _, v := range p.Vars {
			m.Vars[v.Name] = v.Value
		}
	}
	if req.Partial != "" {
		m.Partial, m.PartialWhy = true, req.Partial
	}
	if c := req.Cell; c != nil {
		m.Cell = &ManifestCell{ID: c.ID, Index: c.Index, Values: map[string]string{}}
		for _, kv := range c.Values {
			m.Cell.Values[kv.Key] = kv.Value
		}
	}
	return m
}
