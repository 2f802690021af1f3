package ssh

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// markers is the stderr of one Exec. It passes everything on to out except
// the two lines the remote wrapper writes — "<prefix>pid=N\n" when it starts
// and "<prefix>rc=N\n" when the script has ended, or "<prefix>short=N\n"
// when the script did not come whole (N bytes did) — and records their
// numbers. Only the first of each, in that order, is taken; the prefix holds
// a random nonce, so a script cannot forge them by accident.
type markers struct {
	prefix []byte
	out    io.Writer

	mu      sync.Mutex
	pending []byte // bytes that may be the start of a marker line
	state   int    // 0: looking for pid, 1: looking for rc, 2: done
	pid     int
	rc      int
	cut     bool          // the end was "short=": rc holds the bytes that came
	started chan struct{} // closed when the pid line has been seen
	ended   chan struct{} // closed when the rc line has been seen
}

// maxMarker bounds a marker line after its prefix ("pid=" or "rc=" and up
// to 20 digits); a longer line after the prefix is not a marker.
const maxMarker = 32

func newMarkers(prefix string, out io.Writer) *markers {
	return &markers{
		prefix:  []byte(prefix),
		out:     out,
		started: make(chan struct{}),
		ended:   make(chan struct{}),
	}
}

func (m *markers) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == 2 {
		_, _ = m.out.Write(p)
		return len(p), nil
	}
	m.pending = append(m.pending, p...)
	m.scan()
	return len(p), nil
}

// scan passes on what cannot be part of a marker and takes the markers out.
func (m *markers) scan() {
	for m.state < 2 {
		i := bytes.Index(m.pending, m.prefix)
		if i < 0 {
			keep := partialPrefix(m.pending, m.prefix)
			m.emit(len(m.pending) - keep)
			return
		}
		rest := m.pending[i+len(m.prefix):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 && len(rest) <= maxMarker {
			m.emit(i) // the line is not complete yet
			return
		}
		key := "pid="
		if m.state == 1 {
			key = "rc="
			if bytes.HasPrefix(rest, []byte("short=")) {
				key = "short="
			}
		}
		if nl >= 0 && nl <= maxMarker && bytes.HasPrefix(rest[:nl], []byte(key)) {
			if n, err := strconv.Atoi(string(rest[len(key):nl])); err == nil && n >= 0 {
				m.emit(i)
				m.pending = m.pending[len(m.prefix)+nl+1:]
				if m.state == 0 {
					m.pid = n
					close(m.started)
				} else {
					m.rc, m.cut = n, key == "short="
					close(m.ended)
				}
				m.state++
				continue
			}
		}
		m.emit(i + len(m.prefix)) // the prefix without a marker after it
	}
	m.emit(len(m.pending))
}

// emit passes on the first n pending bytes.
func (m *markers) emit(n int) {
	if n <= 0 {
		return
	}
	_, _ = m.out.Write(m.pending[:n])
	m.pending = append(m.pending[:0], m.pending[n:]...)
}

// flush passes on whatever was held back; the stream has ended.
func (m *markers) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emit(len(m.pending))
}

// partialPrefix returns the length of the longest end of b that is a proper
// beginning of prefix.
func partialPrefix(b, prefix []byte) int {
	for k := min(len(b), len(prefix)-1); k > 0; k-- {
		if bytes.Equal(b[len(b)-k:], prefix[:k]) {
			return k
		}
	}
	return 0
}

// startedPID returns the remote wrapper's process id, or 0 before its
// start line has arrived.
func (m *markers) startedPID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}

// exit returns the script's exit status and whether the wrapper reported it.
func (m *markers) exit() (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rc, m.state == 2 && !m.cut
}

// short returns how many bytes of the script came, and whether the
// wrapper reported that it did not come whole (and so did not run).
func (m *markers) short() (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rc, m.state == 2 && m.cut
}

// hasStarted reports whether the wrapper's start line has arrived.
func (m *markers) hasStarted() bool {
	select {
	case <-m.started:
		return true
	default:
		return false
	}
}
