package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/steps"
)

// DirtyError refuses `apply --require-clean` in a repository with changes.
type DirtyError struct {
	Root    string
	Changed []string // the first of them
	Count   int      // how many there are
	NotRepo bool
}

func (e *DirtyError) Error() string {
	if e.NotRepo {
		return "--require-clean: the plan is not in a git repository, so there is no commit to record; commit it to a repository or leave out --require-clean"
	}
	const most = 20
	list := e.Changed
	more := ""
	if len(list) > most {
		list = list[:most]
	}
	if n := max(e.Count, len(e.Changed)); n > len(list) {
		more = fmt.Sprintf("\n  … and %d more", n-len(list))
	}
	return fmt.Sprintf("--require-clean: the git repository %s has uncommitted changes; commit or stash them:\n  %s%s", e.Root, strings.Join(list, "\n  "), more)
}

// collectProvenance gathers the run's provenance and applies
// --require-clean.
func (a *Apply) collectProvenance(ctx context.Context) error {
	cfg := a.cfg
	// The state directory is never a change: taoflow's own logs.
	info := provenance.Collect(ctx, cfg.PlanPath, cfg.Version, provenance.Options{Exclude: []string{cfg.StateDir}})
	a.prov = &info
	if cfg.RequireClean {
		g := info.Git
		switch {
		case g == nil || !g.Repo:
			return refused(&DirtyError{NotRepo: true})
		case g.Dirty:
			return refused(&DirtyError{Root: g.Root, Changed: g.Changed, Count: g.Changes()})
		}
	}
	return nil
}

// runTags are the plan's tags with --tag's over them.
func (a *Apply) runTags() map[string]string {
	tags := map[string]string{}
	for _, t := range a.cfg.Plan.Tags {
		tags[t.Key] = t.Value
	}
	maps.Copy(tags, a.cfg.Tags)
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// checkName refuses a --name another run has.
func (a *Apply) checkName(ctx context.Context) error {
	if a.cfg.RunName == "" {
		return nil
	}
	r, err := a.store.RunByName(ctx, a.cfg.RunName)
	switch {
	case err == nil:
		return refused(fmt.Errorf("--name %q is taken by run %s; run names are unique in the state", a.cfg.RunName, r.ID))
	case !errors.Is(err, state.ErrNotFound):
		return err
	}
	return nil
}

// recordRun stores the new run's record. A name taken since checkName
// (another apply at once) fails the run before anything starts.
func (a *Apply) recordRun(ctx context.Context) (steps.RunRecord, error) {
	rec := steps.RunRecord{Name: a.cfg.RunName, Tags: a.runTags(), Provenance: a.prov}
	prov, err := json.Marshal(a.prov)
	if err != nil {
		return rec, err
	}
	err = a.store.SetRunRecord(ctx, state.RunRecord{RunID: a.ID, Label: rec.Name, Tags: rec.Tags, Provenance: prov})
	if errors.Is(err, state.ErrNameTaken) {
		msg := fmt.Sprintf("--name %q is taken by another run", a.cfg.RunName)
		_ = a.store.UpdateRun(ctx, a.ID, state.RunUpdate{State: state.RunFailed, ExitCode: 2, Message: msg})
		return rec, refused(errors.New(msg + "; run names are unique in the state"))
	}
	return rec, err
}

// restoreRecord reads a resumed run's record back for its manifests: the
// provenance is the one the run started with.
func (a *Apply) restoreRecord(ctx context.Context) (steps.RunRecord, error) {
	r, err := a.store.RunRecord(ctx, a.ID)
	if err != nil {
		return steps.RunRecord{}, err
	}
	rec := steps.RunRecord{Name: r.Label, Tags: r.Tags}
	if len(r.Provenance) > 0 {
		var info provenance.Info
		if err := json.Unmarshal(r.Provenance, &info); err == nil {
			rec.Provenance = &info
		}
	}
	return rec, nil
}

// Facts recorded on run and upload nodes for the results table.
const (
	factJob         = "job"          // a run node's job id
	factMatrix      = "matrix"       // its cell's values: a JSON array of {key, value}
	factNetworkArch = "network_arch" // TAO: the network architecture
	factAction      = "action"       // TAO: the action
	factUploadedTo  = "uploaded_to"  // an upload node's destination
)

// cellValue is one matrix value of a cell, in the plan's key order.
type cellValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// recordRunFacts records what the results table needs of a run node before
// it launches its job.
func (e *executor) recordRunFacts(ctx context.Context, req steps.Request) {
	set := func(k, v string) {
		if v != "" {
			_ = e.store.SetNodeFact(context.WithoutCancel(ctx), e.run, req.NodeID, k, v)
		}
	}
	set(factJob, req.JobID)
	if c := req.Cell; c != nil {
		vals := make([]cellValue, 0, len(c.Values))
		for _, kv := range c.Values {
			vals = append(vals, cellValue{kv.Key, kv.Value})
		}
		if b, err := json.Marshal(vals); err == nil {
			set(factMatrix, string(b))
		}
	}
	if job, ok := steps.TAOJobOf(req.With); ok {
		set(factNetworkArch, job.NetworkArch)
		set(factAction, job.Action)
	}
}

// Facts of an upload node for `taoflow results --download`.
const (
	factUploadURL   = "upload_url"   // the destination, a file:// one made absolute
	factEndpointURL = "endpoint_url" // with.endpoint_url of an s3:// one
	factRegion      = "region"       // with.region
	// factDownloadedTo is where `results --download` last brought the
	// upload back: an absolute local directory (RecordDownloads).
	factDownloadedTo = "downloaded_to"
)

// recordUpload records where an upload put its results.
func recordUpload(req steps.Request) {
	to := req.With.Get("to")
	if to == nil || to.Text == "" {
		return
	}
	req.Record(factUploadedTo, to.Text)
	u := to.Text
	if p, ok := strings.CutPrefix(u, "file://"); ok && !filepath.IsAbs(p) {
		if cwd, err := os.Getwd(); err == nil {
			u = "file://" + filepath.Join(cwd, p)
		}
	}
	req.Record(factUploadURL, u)
	for _, k := range []string{factEndpointURL, factRegion} {
		if v := req.With.Get(k); v != nil && v.Text != "" {
			req.Record(k, v.Text)
		}
	}
}
