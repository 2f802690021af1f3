package steps

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/taoflow/taoflow/plan"
)

// The readers below take a node's with: values. Plan validation already
// checked their shapes; expressions substituted since then are checked
// again here, and a bad value is a ClassInvalidConfig error.

func withString(w *plan.Value, key string) string {
	v := w.Get(key)
	if v == nil || v.Kind != plan.Scalar {
		return ""
	}
	return v.Text
}

func withDuration(w *plan.Value, key string, def time.Duration) (time.Duration, error) {
	s := withString(w, key)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q is not a positive duration (use Go syntax such as 90s, 10m, 12h)", key, s)}
	}
	return d, nil
}

// withBool returns the value of a boolean key and whether it is set.
func withBool(w *plan.Value, key string) (val, set bool, err error) {
	s := withString(w, key)
	if s == "" {
		return false, false, nil
	}
	b, err := strconv.ParseBool(strings.ToLower(s))
	if err != nil {
		return false, false, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q is not true or false", key, s)}
	}
	return b, true, nil
}

// withInt returns the value of an integer key, 0 when absent.
func withInt(w *plan.Value, key string) (int, error) {
	s := withString(w, key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q is not a whole number", key, s)}
	}
	return n, nil
}

// withList reads a string or a list of strings.
func withList(w *plan.Value, key string) []string {
	v := w.Get(key)
	if v == nil {
		return nil
	}
	switch v.Kind {
	case plan.Scalar:
		return []string{v.Text}
	case plan.List:
		out := []string{} // an empty list is not an absent key (env: [] sends no secrets)
		for _, it := range v.Items {
			if it.Kind == plan.Scalar {
				out = append(out, it.Text)
			}
		}
		return out
	}
	return nil
}

// confinedPaths checks, at run time, that the path fields keys of req
// (volumes, results, workdir, from, to) stay under the directory the
// literal text of the plan names before their first expression: a value
// substituted then (plan.UnderLiteralPrefix) must not climb out with "..".
// Validation checks the values it knows already; this catches the rest.
func confinedPaths(req Request, keys ...string) error {
	if req.Step == nil || req.Step.With == nil {
		return nil
	}
	for _, key := range keys {
		raw, rendered := withList(req.Step.With, key), withList(req.With, key)
		if len(raw) != len(rendered) {
			continue
		}
		for i := range raw {
			if !plan.UnderLiteralPrefix(raw[i], rendered[i]) {
				return &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.%s: %q leaves the directory %q names: a substituted value must not climb out of it with \"..\"", key, rendered[i], raw[i])}
			}
		}
	}
	return nil
}
