package schema

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestValidSupportsSchema makes sure the shortcut of Validate and
// ValidateDef is in use: valid answers no, silently, for a schema with a
// keyword it does not evaluate.
func TestValidSupportsSchema(t *testing.T) {
	sch, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	if !supported(sch) {
		t.Error("the plan schema uses a keyword valid does not evaluate: Validate never takes its shortcut")
	}
	for _, kind := range StepKinds() {
		def, err := CompileDef("with-" + kind)
		if err != nil {
			t.Fatal(err)
		}
		if !supported(def) {
			t.Errorf("with-%s uses a keyword valid does not evaluate", kind)
		}
	}
}

// TestValidMatchesLibrary compares valid with the library on variants of
// the design example: values replaced by others of every type (and by
// values found elsewhere in the plan, so that many variants are valid),
// keys removed and added, list items repeated.
func TestValidMatchesLibrary(t *testing.T) {
	sch, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	base := decode(t, []byte(designPlan))
	pool := []any{nil, true, false, "", "x", "a-b", "Bad_Name", "30s", "0s", "-1m", "1h30m", "${{ vars.image }}",
		"nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt", "s3://b/p", "https://x.example", "echo hi",
		json.Number("0"), json.Number("1"), json.Number("-1"), json.Number("2.5"), json.Number("1e3"), json.Number("4.0"),
		json.Number("65536"), map[string]any{}, []any{}, []any{"a"}, []any{"a", "a"}, map[string]any{"x": "y"}}
	for _, k := range StepKinds() {
		pool = append(pool, k)
	}
	var walkValues func(v any)
	walkValues = func(v any) {
		pool = append(pool, v)
		switch v := v.(type) {
		case map[string]any:
			for _, c := range v {
				walkValues(c)
			}
		case []any:
			for _, c := range v {
				walkValues(c)
			}
		}
	}
	walkValues(base)
	r := rand.New(rand.NewPCG(13, 4))
	pick := func() any { return clone(pool[r.IntN(len(pool))]) }
	n := 2000
	if testing.Short() {
		n = 500
	}
	var nValid, nInvalid int
	for i := range n {
		doc := clone(base)
		for range 1 + r.IntN(3) {
			mutate(r, doc, pick)
		}
		want := sch.Validate(doc) == nil
		if got := valid(sch, anyInstance(doc)); got != want {
			text, _ := json.Marshal(doc)
			t.Fatalf("variant %d: valid says %v, the library %v:\n%s", i, got, want, text)
		}
		if want {
			nValid++
		} else {
			nInvalid++
		}
	}
	t.Logf("%d valid and %d invalid variants", nValid, nInvalid)
	if nValid < n/20 || nInvalid < n/20 {
		t.Errorf("too few variants of one kind: %d valid, %d invalid", nValid, nInvalid)
	}
}

// mutate changes one place in doc: a value replaced, a key removed or
// added, or a list item repeated.
func mutate(r *rand.Rand, doc any, pick func() any) {
	var paths [][]any // each a path of keys (string) and indexes (int)
	var walk func(v any, at []any)
	walk = func(v any, at []any) {
		paths = append(paths, at)
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k], append(slices.Clip(at), k))
			}
		case []any:
			for i, c := range v {
				walk(c, append(slices.Clip(at), i))
			}
		}
	}
	walk(doc, nil)
	path := paths[1+r.IntN(len(paths)-1)]
	parent := doc
	for _, tok := range path[:len(path)-1] {
		switch tok := tok.(type) {
		case string:
			parent = parent.(map[string]any)[tok]
		case int:
			parent = parent.([]any)[tok]
		}
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		k := last.(string)
		switch r.IntN(4) {
		case 0:
			delete(p, k)
		case 1:
			p["k"+strconv.Itoa(r.IntN(3))] = pick()
		default:
			p[k] = pick()
		}
	case []any:
		i := last.(int)
		if r.IntN(4) == 0 {
			p[(i+1)%len(p)] = clone(p[i])
		} else {
			p[i] = pick()
		}
	}
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			out[k] = clone(c)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = clone(c)
		}
		return out
	}
	return v
}
