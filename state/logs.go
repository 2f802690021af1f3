package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxPending is how much of an unfinished line AppendLog holds back before
// it writes it anyway.
const maxPending = 64 << 10

// maxNameLen bounds the readable part of a log file or run directory name.
const maxNameLen = 100

// logFile is one node's log as this Store writes it.
type logFile struct {
	mu      sync.Mutex
	path    string
	pending []byte // the unfinished last line, not yet redacted or written
}

// LogPath is the file holding the log of node of run:
// dir/runs/<run>/logs/<node>.log, with each name made safe for a file name.
func (s *Store) LogPath(run, node string) string {
	return filepath.Join(s.dir, s.logRel(s.r(run), s.r(node)))
}

// logRel is the log path relative to the state directory, from redacted ids.
func (s *Store) logRel(run, node string) string {
	return filepath.Join("runs", fileName(run), "logs", fileName(node)+".log")
}

// fileName maps id to a file name: it keeps [A-Za-z0-9._-], replaces any
// other byte with '_', and when it changed anything (or had to shorten the
// name, or the name would start with a dot) appends a short hash of id so
// that different ids keep different names.
func fileName(id string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case i == 0 && c == '.':
			b.WriteByte('_')
			changed = true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	name := b.String()
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
		changed = true
	}
	if name == "" || changed {
		sum := sha256.Sum256([]byte(id))
		name += "-" + hex.EncodeToString(sum[:6])
	}
	return name
}

// AppendLog appends p to the log of node of run. It is safe to call from
// many goroutines. Output is written line by line (a line ends at '\n' or
// '\r') so that the redactor sees whole lines and a secret split across two
// calls is still caught; an unfinished line is held back until it ends, it
// passes 64 KiB, or FlushLog or Close is called.
func (s *Store) AppendLog(run, node string, p []byte) error {
	if err := s.writable("append log"); err != nil {
		return err
	}
	l, err := s.logFor(run, node)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, p...)
	n := bytes.LastIndexAny(l.pending, "\n\r") + 1
	if n == 0 {
		if len(l.pending) < maxPending {
			return nil
		}
		n = len(l.pending)
	}
	return s.writeLog(l, n)
}

// FlushLog writes out the unfinished last line of the log of node of run,
// as when the node ends.
func (s *Store) FlushLog(run, node string) error {
	if err := s.writable("flush log"); err != nil {
		return err
	}
	s.logsMu.Lock()
	l := s.logs[s.r(run)+"\x00"+s.r(node)]
	s.logsMu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return s.writeLog(l, len(l.pending))
}

// flushLogs flushes every log this Store has written to.
func (s *Store) flushLogs() error {
	s.logsMu.Lock()
	all := make([]*logFile, 0, len(s.logs))
	for _, l := range s.logs {
		all = append(all, l)
	}
	s.logsMu.Unlock()
	var errs []error
	for _, l := range all {
		l.mu.Lock()
		errs = append(errs, s.writeLog(l, len(l.pending)))
		l.mu.Unlock()
	}
	return errors.Join(errs...)
}

// writeLog redacts and appends the first n pending bytes of l; l.mu is held.
func (s *Store) writeLog(l *logFile, n int) error {
	if n == 0 {
		return nil
	}
	chunk := s.r(string(l.pending[:n]))
	l.pending = append(l.pending[:0], l.pending[n:]...)
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("state: append log: %w", err)
	}
	_, err = f.WriteString(chunk)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state: append log: %w", err)
	}
	return nil
}

// logFor returns the log of node of run, creating its directory, its empty
// file (mode 0600) and its index entry the first time.
func (s *Store) logFor(run, node string) (*logFile, error) {
	run, node = s.r(run), s.r(node)
	key := run + "\x00" + node
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	if s.closed {
		return nil, errors.New("state: append log: store is closed")
	}
	if l := s.logs[key]; l != nil {
		return l, nil
	}
	rel := s.logRel(run, node)
	path := filepath.Join(s.dir, rel)
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("state: log of node %q: %w", node, err)
	}
	if _, err := s.st.indexLog.ExecContext(context.Background(), run, node, rel); err != nil {
		return nil, fmt.Errorf("state: log of node %q of run %q: %w", node, run, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		err = f.Chmod(0o600)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("state: log of node %q: %w", node, err)
	}
	l := &logFile{path: path}
	s.logs[key] = l
	return l, nil
}

// OpenLog opens the log of node of run for reading. It fails with an error
// wrapping ErrNotFound when the node has no log.
func (s *Store) OpenLog(run, node string) (io.ReadCloser, error) {
	f, err := os.Open(s.LogPath(run, node))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("state: log of node %q of run %q: %w", s.r(node), s.r(run), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return f, nil
}

// LogNodes returns the ids of the nodes of run that have a log, in the order
// their logs were started.
func (s *Store) LogNodes(run string) ([]string, error) {
	rows, err := s.st.logNodes.QueryContext(context.Background(), s.r(run))
	if err != nil {
		return nil, fmt.Errorf("state: logs of run %q: %w", s.r(run), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var node string
		if err := rows.Scan(&node); err != nil {
			return nil, fmt.Errorf("state: logs of run %q: %w", s.r(run), err)
		}
		out = append(out, node)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: logs of run %q: %w", s.r(run), err)
	}
	return out, nil
}
