package secret

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinRedactLen is the shortest value, in bytes, that a Redactor redacts.
// Shorter values are ignored: they match too much ordinary text, and
// masking them would point at where the secret occurs.
const MinRedactLen = 4

// minShiftedLen is the shortest base64 fragment registered for a value
// seen at an offset inside a longer base64 string.
const minShiftedLen = 8

// Mask replaces every redacted occurrence.
const Mask = "***"

// Redactor replaces secret values, and their encoded forms, with Mask.
// It is immutable once built and safe for concurrent use. A nil *Redactor
// is valid and redacts nothing.
type Redactor struct {
	patterns  []string         // distinct, longest first
	byPrefix  map[uint32][]int // first four bytes → patterns, longest first
	filter    [1 << 10]uint64  // bit set of hashed four-byte prefixes
	maxLen    int              // longest pattern
	starred   bool             // some pattern contains '*': redact to a fixed point
	multiline bool             // some pattern contains a line break
}

// NewRedactor builds a Redactor for values. Each value of at least
// MinRedactLen bytes is redacted in these forms:
//   - as is, and each of its lines when it has several;
//   - hex, lower and upper case;
//   - base64 in the standard and URL alphabets, padded and raw, also of
//     the value followed by a newline (what `echo $X | base64` prints);
//   - base64 of "$oauthtoken:" + value, the docker config.json auth entry
//     for nvcr.io;
//   - the part of its base64 that stays the same wherever it sits inside a
//     longer base64 string, at each of the three byte alignments (this
//     covers docker "USER:VALUE" auth strings for any user);
//   - JSON string escaping and URL query escaping, where they differ.
//
// Overlapping and adjacent occurrences are merged into one Mask, so
// secrets that overlap each other are redacted completely.
func NewRedactor(values ...string) *Redactor {
	seen := map[string]bool{}
	r := &Redactor{byPrefix: map[uint32][]int{}}
	add := func(p string) {
		if len(p) < MinRedactLen || seen[p] {
			return
		}
		seen[p] = true
		r.patterns = append(r.patterns, p)
	}
	for _, v := range values {
		if len(v) < MinRedactLen {
			continue
		}
		for _, f := range forms(v) {
			add(f)
		}
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
				for _, f := range forms(line) {
					add(f)
				}
			}
		}
	}
	slices.SortStableFunc(r.patterns, func(a, b string) int { return len(b) - len(a) })
	for i, p := range r.patterns {
		w := word(p, 0)
		r.byPrefix[w] = append(r.byPrefix[w], i)
		h := hash(w)
		r.filter[h>>6] |= 1 << (h & 63)
		r.maxLen = max(r.maxLen, len(p))
		r.starred = r.starred || strings.Contains(p, "*")
		r.multiline = r.multiline || strings.Contains(p, "\n")
	}
	return r
}

// forms returns the encodings of v that are redacted.
func forms(v string) []string {
	if len(v) < MinRedactLen {
		return nil
	}
	b := []byte(v)
	out := []string{
		v,
		hex.EncodeToString(b),
		strings.ToUpper(hex.EncodeToString(b)),
		base64.StdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		base64.StdEncoding.EncodeToString([]byte(v + "\n")),
		base64.StdEncoding.EncodeToString([]byte("$oauthtoken:" + v)),
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for shift := range 3 {
			if f := shifted(enc, b, shift); len(f) >= minShiftedLen {
				out = append(out, f)
			}
		}
	}
	if j, err := json.Marshal(v); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	return out
}

// shifted returns the base64 characters that depend only on b when b
// starts shift bytes into a longer encoded string, whatever surrounds it.
func shifted(enc *base64.Encoding, b []byte, shift int) string {
	s := enc.EncodeToString(append(make([]byte, shift), b...))
	first := (8*shift + 5) / 6       // first character with no bit of the prefix
	last := 8 * (shift + len(b)) / 6 // characters before it end inside b
	if last <= first {
		return ""
	}
	return s[first:last]
}

// word reads four bytes of s at i as a little-endian number.
func word(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

func hash(w uint32) uint32 { return (w * 0x9E3779B1) >> 16 }

// span is a half-open byte range to mask.
type span struct{ start, end int }

// spans finds every occurrence of every pattern in s, merged into sorted,
// disjoint, non-adjacent ranges.
func (r *Redactor) spans(s string) []span {
	var out []span
	for i := 0; i+MinRedactLen <= len(s); i++ {
		w := word(s, i)
		h := hash(w)
		if r.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, k := range r.byPrefix[w] {
			p := r.patterns[k]
			if !strings.HasPrefix(s[i:], p) {
				continue
			}
			end := i + len(p)
			if n := len(out); n > 0 && i <= out[n-1].end {
				out[n-1].end = max(out[n-1].end, end)
			} else {
				out = append(out, span{i, end})
			}
			break // longest first: shorter matches here lie inside this one
		}
	}
	return out
}

// mask replaces each span of s with Mask.
func mask(s string, spans []span) string {
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.start])
		b.WriteString(Mask)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// Redact returns s with every occurrence of a secret form replaced by
// Mask.
func (r *Redactor) Redact(s string) string {
	if r == nil || len(r.patterns) == 0 {
		return s
	}
	for {
		sp := r.spans(s)
		if len(sp) == 0 {
			return s
		}
		s = mask(s, sp)
		// Only a secret containing '*' can reappear around a Mask; each
		// round shortens s (a pattern is longer than Mask), so this ends.
		if !r.starred {
			return s
		}
	}
}

// RedactBytes is Redact for a byte slice. It returns b itself when there
// is nothing to redact, else a new slice.
func (r *Redactor) RedactBytes(b []byte) []byte {
	if r == nil || len(r.patterns) == 0 {
		return b
	}
	s := string(b)
	out := r.Redact(s)
	if out == s {
		return b
	}
	return []byte(out)
}

// Clip redacts s and then cuts it to at most n bytes, on a rune boundary,
// with "…" appended when it cut. Redacting first is what keeps a secret
// that straddles the cut from leaving a prefix of itself in the result:
// cut first, and the prefix no longer matches the secret.
func (r *Redactor) Clip(s string, n int) string {
	return ClipText(r.Redact(s), n)
}

// ClipText cuts s to at most n bytes on a rune boundary, with "…" appended
// when it cut. It does not redact: use it only on text that is already
// redacted or holds no secret (Redactor.Clip does both).
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// MaxLen is the length in bytes of the longest form r redacts (0 for
// none). A stream that must pass on part of a text before the rest arrives
// redacts it, passes on all but its last MaxLen bytes and keeps those with
// what follows: a secret not yet whole lies within them.
func (r *Redactor) MaxLen() int {
	if r == nil {
		return 0
	}
	return r.maxLen
}
