package secret

import (
	"errors"
	"io"
	"strings"
	"sync"
)

// holdLimit bounds how much a Writer holds back while a run of overlapping
// secrets keeps growing across writes (beyond the longest secret form).
const holdLimit = 4 << 10

// errClosed is returned by Write after Close.
var errClosed = errors.New("secret: write to a closed redacting writer")

// writer redacts a stream; see NewWriter.
type writer struct {
	mu     sync.Mutex
	w      io.Writer
	r      *Redactor
	buf    []byte // written, not yet passed on
	err    error  // sticky error from w
	closed bool
}

// NewWriter returns a writer that passes everything written to it on to w
// with r's secrets redacted, also when a secret is split across Write
// calls: it holds back the last bytes that could start a secret until more
// data arrives or Close is called. Complete lines are not held back (unless
// a secret value spans lines), so line-oriented output such as a followed
// log flows as it is written. Close flushes what is held back; it
// does not close w. The writer is safe for concurrent use; with a nil
// Redactor it copies through unchanged.
func NewWriter(w io.Writer, r *Redactor) io.WriteCloser {
	return &writer{w: w, r: r}
}

// Write redacts and forwards p, holding back a possible partial secret at
// its end. It returns len(p) or the first error of the underlying writer,
// which is then returned by every later call.
func (wr *writer) Write(p []byte) (int, error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.closed {
		return 0, errClosed
	}
	if wr.err != nil {
		return 0, wr.err
	}
	if wr.r == nil || wr.r.maxLen == 0 {
		n, err := wr.w.Write(p)
		wr.err = err
		return n, err
	}
	wr.buf = append(wr.buf, p...)
	s := string(wr.buf)
	spans := wr.r.spans(s)
	cut := wr.cut(s, spans)
	if cut <= 0 {
		return len(p), nil
	}
	var done []span
	for _, sp := range spans {
		if sp.start >= cut {
			break
		}
		done = append(done, sp)
	}
	out := mask(s[:cut], done)
	if wr.r.starred {
		out = wr.r.Redact(out)
	}
	wr.buf = wr.buf[:copy(wr.buf, wr.buf[cut:])]
	if _, err := io.WriteString(wr.w, out); err != nil {
		wr.err = err
		return 0, err
	}
	return len(p), nil
}

// cut is how many bytes of s can be passed on now: all but the last
// maxLen-1 (a secret starting there may continue in the next write) or
// all up to the last line break when no secret form holds one, and
// never splitting a found occurrence, which is held back whole so that an
// overlapping secret completed later merges with it.
func (wr *writer) cut(s string, spans []span) int {
	cut := len(s) - (wr.r.maxLen - 1)
	if !wr.r.multiline {
		// No secret form spans a line break, so complete lines can go now.
		cut = max(cut, strings.LastIndexByte(s, '\n')+1)
	}
	for _, sp := range spans {
		if sp.start < cut && cut < sp.end {
			if sp.start > 0 || len(s) < holdLimit+wr.r.maxLen {
				return sp.start
			}
			return sp.end // a run of overlapping secrets grew past holdLimit
		}
	}
	return cut
}

// Close passes on what is held back, redacted. It does not close the
// underlying writer. Closing twice is a no-op.
func (wr *writer) Close() error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.closed {
		return nil
	}
	wr.closed = true
	if wr.err != nil || len(wr.buf) == 0 {
		return wr.err
	}
	out := wr.r.Redact(string(wr.buf))
	wr.buf = nil
	_, err := io.WriteString(wr.w, out)
	return err
}
