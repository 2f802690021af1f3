package plan

import (
	"math/rand/v2"
	"testing"
)

// TestTypoCandidates checks that the quick scan of typos never skips an
// expression that would report something: on random text of the
// pieces that matter, a flag that is off means no match (for
// bareBracesRE, none that is not right after a $).
func TestTypoCandidates(t *testing.T) {
	pieces := []string{"$", " ", "\t", "\n", "{", "}", "{{", "}}", "vars.x", "cell.id", "a", "_b", "9", "-", "."}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, 64)
	for range 200_000 {
		buf = buf[:0]
		for range 1 + r.IntN(12) {
			buf = append(buf, pieces[r.IntN(len(pieces))]...)
		}
		text := string(buf)
		spaced, braces, shellVar := typoCandidates(text)
		if !spaced && spacedOpenRE.MatchString(text) {
			t.Fatalf("%q: spacedOpenRE matches", text)
		}
		if !shellVar && shellVarRE.MatchString(text) {
			t.Fatalf("%q: shellVarRE matches", text)
		}
		if !braces {
			for _, m := range bareBracesRE.FindAllStringIndex(text, -1) {
				if m[0] == 0 || text[m[0]-1] != '$' {
					t.Fatalf("%q: bareBracesRE matches at %d", text, m[0])
				}
			}
		}
	}
}
