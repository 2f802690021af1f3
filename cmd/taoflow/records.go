package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/schema"
	"github.com/taoflow/taoflow/state"
)

var runNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// versionString is taoflow's version with the build's revision, as
// recorded in a run's provenance.
func versionString() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return version + " " + s.Value[:12]
			}
		}
	}
	return version
}

// checkRunName checks apply --name.
func checkRunName(name string) error {
	if name != "" && !runNameRE.MatchString(name) {
		return usageError(fmt.Errorf("--name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64 characters", name))
	}
	return nil
}

// parseTags reads --tag key=value flags.
func parseTags(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	tags := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		// The schema's tag-key, the one rule for a plan's tags: and --tag.
		if !ok || schema.ValidateDef("tag-key", k) != nil {
			return nil, usageError(fmt.Errorf("--tag %q: want KEY=VALUE, KEY of letters, digits, '_', '-' and '.', starting with a letter", f))
		}
		tags[k] = v
	}
	return tags, nil
}

// matchTags reports whether tags hold every key=value of want.
func matchTags(tags, want map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// formatTags writes tags as "k=v k=v", keys sorted.
func formatTags(tags map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		parts = append(parts, k+"="+tags[k])
	}
	return strings.Join(parts, " ")
}

// showRecord prints a run's name, tags and provenance for status RUN.
func showRecord(w io.Writer, rec state.RunRecord, nodes []state.Node, resources []state.Resource) {
	if rec.Label != "" {
		fmt.Fprintf(w, "name: %s\n", rec.Label)
	}
	if len(rec.Tags) > 0 {
		fmt.Fprintf(w, "tags: %s\n", formatTags(rec.Tags))
	}
	var info provenance.Info
	if len(rec.Provenance) > 0 && json.Unmarshal(rec.Provenance, &info) == nil {
		if g := info.Git; g != nil {
			switch {
			case !g.Repo:
				fmt.Fprintf(w, "git: none (%s)\n", g.Note)
			default:
				commit := g.Commit
				if commit == "" {
					commit = "(no commit yet)"
				}
				line := "git: " + commit
				if g.Branch != "" {
					line += " on " + g.Branch
				}
				if g.Dirty {
					line += fmt.Sprintf(", dirty (%d changed", g.Changes())
					if g.DiffHash != "" {
						line += fmt.Sprintf(", diff sha256 %.12s", g.DiffHash)
					}
					line += ")"
				} else {
					line += ", clean"
				}
				if g.Remote != "" {
					line += ", remote " + g.Remote
				}
				fmt.Fprintln(w, line)
			}
		}
		fmt.Fprintf(w, "ran by: %s@%s with taoflow %s\n", info.User, info.Host, info.Version)
	}
	// The types of the instances the run created.
	for _, r := range resources {
		if r.Kind == state.KindInstance && r.Data["type"] != "" {
			fmt.Fprintf(w, "instance: %s type %s\n", r.Instance, r.Data["type"])
		}
	}
	// The images' digests that pull steps recorded, once per instance.
	seen := map[string]bool{}
	for _, n := range nodes {
		img, dig := n.Facts["image"], n.Facts["digest"]
		if img == "" || dig == "" {
			continue
		}
		line := fmt.Sprintf("image: %s = %s", img, dig)
		if n.Instance != "" {
			line += " on " + n.Instance
		}
		if !seen[line] {
			seen[line] = true
			fmt.Fprintln(w, line)
		}
	}
}

// reportNotify says how the notifiers went; a failure never changes the
// exit status.
func reportNotify(w io.Writer, outcomes []runner.NotifyOutcome) {
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Fprintf(w, "taoflow: %s failed (the run's exit status is unchanged): %v\n", o.What, o.Err)
		} else {
			fmt.Fprintf(w, "taoflow: %s: sent\n", o.What)
		}
	}
}
