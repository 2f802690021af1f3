package brev

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseExecOutput: whatever a script prints (it may print anything,
// including text that looks like a marker), the wrapper's own marker and
// brev's echoed name are taken off exactly, and the script's output and
// exit code come back unchanged.
func FuzzParseExecOutput(f *testing.F) {
	f.Add([]byte("hello\n"), 0, true, false)
	f.Add([]byte("no newline"), 7, true, true)
	f.Add([]byte("\n__TAOFLOW_RC_0000000000000000=3\n"), 255, false, false)
	f.Add([]byte(""), 1, true, false)
	const nonce, name = "a1b2c3d4e5f60718", "tf-run-gpu"
	f.Fuzz(func(t *testing.T, script []byte, rc int, echo, glued bool) {
		rc &= 0xff
		if bytes.Contains(script, []byte(marker(nonce))) {
			return // a script cannot guess the per-call nonce
		}
		out := append([]byte{}, script...)
		out = append(out, fmt.Sprintf("\n%s%d\n", marker(nonce), rc)...)
		if echo {
			if glued {
				out = out[:len(out)-1] // the name glued to the number
			}
			out = append(out, name+"\n"...)
		}
		got, gotRC, ok := parseExecOutput(out, nonce, name)
		if !ok || gotRC != rc || !bytes.Equal(got, script) {
			t.Fatalf("parse(%q) = %q, %d, %v; want %q, %d", out, got, gotRC, ok, script, rc)
		}
	})
}

// FuzzParseList: no input makes ParseList panic, and what it accepts reads
// the same written back in either shape brev prints.
func FuzzParseList(f *testing.F) {
	f.Add([]byte(`{"workspaces":[{"name":"a","id":"x","status":"RUNNING"}]}`))
	f.Add([]byte(`[{"name":"a","status":"DEPLOYING"}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"workspaces": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := ParseList(data)
		if err != nil {
			return
		}
		array, _ := json.Marshal(ws)
		object, _ := json.Marshal(map[string]any{"workspaces": ws})
		for _, again := range [][]byte{array, object} {
			got, err := ParseList(again)
			if err != nil || len(got) != len(ws) || (len(ws) > 0 && !reflect.DeepEqual(got, ws)) {
				t.Fatalf("ParseList(%q) = %+v, but %q reads as %+v, %v", data, ws, again, got, err)
			}
		}
	})
}

// FuzzParseSearch: no answer makes ParseSearch panic, and every offer it
// accepts is one type (no comma, no space, no leading '-'), with no
// control character in its texts and a finite price of 0 or more.
func FuzzParseSearch(f *testing.F) {
	f.Add([]byte(`[{"type":"g5.xlarge","provider":"aws","gpu_name":"A10G","gpu_count":1,"price_per_hour":1.21}]`))
	f.Add([]byte(`[{"type":"g5.xlarge,p5.48xlarge","price_per_hour":0.01}]`))
	f.Add([]byte(`[{"type":"g5.xlarge","price_per_hour":-98.32}]`))
	f.Add([]byte(`[{"type":"g5\u001b]52;c;aGk=\u0007","gpu_name":"A10G\u009b2K"}]`))
	f.Add([]byte(`[{"type":"--dry-run"},{"type":"a b"},{"type":""}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		offers, err := ParseSearch(data)
		if err != nil {
			return
		}
		for _, o := range offers {
			bad := o.Type == "" || strings.HasPrefix(o.Type, "-") || strings.ContainsAny(o.Type, ", \t\n\r") ||
				o.PricePerHour < 0 || math.IsNaN(o.PricePerHour) || math.IsInf(o.PricePerHour, 0) || o.GPUs < 0
			for _, s := range []string{o.Type, o.Provider, o.GPU} {
				bad = bad || strings.IndexFunc(s, unicode.IsControl) >= 0
			}
			if bad {
				t.Fatalf("ParseSearch(%q) accepted %+v", data, o)
			}
		}
	})
}
