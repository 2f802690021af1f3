package platform

import "fmt"

// Tail is an io.Writer that keeps the last max bytes written to it in a ring
// and counts the bytes it dropped.
type Tail struct {
	max     int
	buf     []byte // grows up to max, then is used as a ring
	start   int    // oldest byte once the ring is full
	dropped int64
}

// NewTail keeps the last max bytes written (the platforms cap captured output with it).
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	if t.max <= 0 {
		t.dropped += int64(n)
		return n, nil
	}
	if len(p) > t.max {
		t.dropped += int64(len(t.buf) + len(p) - t.max)
		p = p[len(p)-t.max:]
		t.buf = append(t.buf[:0], p...)
		t.start = 0
		return n, nil
	}
	if room := t.max - len(t.buf); room > 0 {
		k := min(room, len(p))
		t.buf = append(t.buf, p[:k]...)
		p = p[k:]
	}
	// The ring is full: overwrite the oldest bytes.
	t.dropped += int64(len(p))
	for len(p) > 0 {
		k := copy(t.buf[t.start:], p)
		p = p[k:]
		t.start = (t.start + k) % t.max
	}
	return n, nil
}

// Bytes returns what was kept, oldest first, behind a marker line when bytes
// were dropped.
func (t *Tail) Bytes() []byte {
	var out []byte
	if t.dropped > 0 {
		out = fmt.Appendf(nil, "[taoflow: output truncated: %d bytes dropped before this line]\n", t.dropped)
	}
	out = append(out, t.buf[t.start:]...)
	return append(out, t.buf[:t.start]...)
}
