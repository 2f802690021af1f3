package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned (wrapped) when a run, node, resource or log does
// not exist. Test for it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrNoState is what OpenReadOnly's error wraps when the directory holds
// no state (yet): for status that is "no runs", not a failure.
var ErrNoState = errors.New("no taoflow state")

// ErrReadOnly is returned (wrapped) by every write on a Store opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("state opened read-only")

// dbName is the database file inside the state directory.
const dbName = "state.db"

// Store is the run state of one state directory. It is safe for use by many
// goroutines; several processes may open the same directory, one writing
// through Open and any number reading through OpenReadOnly.
type Store struct {
	dir      string
	db       *sql.DB
	st       stmts
	redact   func(string) string
	now      func() time.Time
	readOnly bool

	logsMu sync.Mutex
	logs   map[string]*logFile // by redacted run + "\x00" + redacted node
	closed bool
}

// Option configures a Store.
type Option func(*Store)

// WithRedactor makes every string the store writes, to the database or to a
// log file, pass through redact first. redact must be deterministic and safe
// for concurrent use: lookups by run or node id pass the id through it too,
// so that they find what was written. The default is the identity.
func WithRedactor(redact func(string) string) Option {
	return func(s *Store) {
		if redact != nil {
			s.redact = redact
		}
	}
}

func newStore(dir string, readOnly bool, opts []Option) *Store {
	s := &Store{
		dir:      dir,
		redact:   func(v string) string { return v },
		now:      time.Now,
		readOnly: readOnly,
		logs:     map[string]*logFile{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Open opens the state in dir for reading and writing, creating dir (mode
// 0700) and dir/state.db (mode 0600) when missing and bringing the schema up
// to date. A dir or state.db that is not this user's alone to write is
// refused with an error wrapping ErrUnsafe.
func Open(dir string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	_, statErr := os.Stat(abs)
	if err := mkdirPrivate(abs); err != nil {
		return nil, fmt.Errorf("state: create %s: %w", dir, err)
	}
	if err := checkPrivate(abs); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	ignoreInGit(abs, errors.Is(statErr, fs.ErrNotExist))
	path := filepath.Join(abs, dbName)
	// Create the file ourselves so that its mode does not depend on the
	// umask; SQLite gives the -wal and -shm files the database's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}

	s := newStore(abs, false, opts)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", fileURI(path, q))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	// One connection serialises this process's writes in Go instead of
	// making goroutines contend for SQLite's write lock.
	db.SetMaxOpenConns(1)
	s.db = db
	if err := migrate(context.Background(), db); err != nil {
		db.Close()
		return nil, fmt.Errorf("state: %s: %w", path, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+suffix, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.Close()
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	if err := s.prepare(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens the state in dir for reading only, as `status` and
// `logs` do while `apply` writes. It creates nothing; when dir holds no
// state it fails with "no taoflow state in DIR". It refuses what Open
// refuses.
func OpenReadOnly(dir string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	path := filepath.Join(abs, dbName)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoState, dir)
	}
	if err := checkPrivate(abs); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	s := newStore(abs, true, opts)
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", fileURI(path, q))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	s.db = db
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("state: %s: %w", path, err)
	}
	switch {
	case v == 0:
		db.Close()
		return nil, fmt.Errorf("%w in %s", ErrNoState, dir)
	case v > len(migrations):
		db.Close()
		return nil, fmt.Errorf("state: %s has schema version %d, newer than this taoflow knows (%d)", path, v, len(migrations))
	case v < len(migrations):
		db.Close()
		return nil, fmt.Errorf("state: %s has schema version %d, older than %d: run a taoflow command that writes state to upgrade it", path, v, len(migrations))
	}
	if err := s.prepare(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close writes out buffered log lines and closes the database.
func (s *Store) Close() error {
	var errs []error
	if !s.readOnly {
		errs = append(errs, s.flushLogs())
	}
	s.logsMu.Lock()
	s.closed = true
	s.logsMu.Unlock()
	errs = append(errs, s.st.close(), s.db.Close())
	return errors.Join(errs...)
}

// fileURI is an SQLite URI for path with the query q.
func fileURI(path string, q url.Values) string {
	u := url.URL{Path: filepath.ToSlash(path)}
	return "file:" + u.EscapedPath() + "?" + q.Encode()
}

// gitignoreBody is the .gitignore a state directory holds, so that git
// (status, add -A, provenance) never sees taoflow's own files, as
// Python's venv does for a virtual environment.
const gitignoreBody = "# Created by taoflow: its state (logs, database) is never committed.\n*\n"

// ownNames are the entries taoflow itself makes in a state directory.
var ownNames = map[string]bool{
	dbName: true, dbName + "-wal": true, dbName + "-shm": true, dbName + "-journal": true,
	"runs": true, "sandboxes": true, ".gitignore": true,
}

// ignoreInGit writes dir/.gitignore (gitignoreBody) unless it exists:
// always in a directory Open has just made, and in an existing one only
// when it holds nothing but taoflow's own entries (ownNames), so a state
// directory that is also someone's project (--state .) never has its
// files hidden from git. Failing to write it is not an error.
func ignoreInGit(dir string, created bool) {
	path := filepath.Join(dir, ".gitignore")
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if !created {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !ownNames[e.Name()] {
				return
			}
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	_, err = f.WriteString(gitignoreBody)
	if cerr := f.Close(); err != nil || cerr != nil {
		_ = os.Remove(path)
	}
}

// mkdirPrivate creates dir and its missing parents with mode 0700, whatever
// the umask. An existing directory is left as it is.
func mkdirPrivate(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, 0o700)
}

func (s *Store) writable(op string) error {
	if s.readOnly {
		return fmt.Errorf("state: %s: %w", op, ErrReadOnly)
	}
	return nil
}

// r redacts one string.
func (s *Store) r(v string) string { return s.redact(v) }

// encodeMap redacts every key and value of m and encodes it as JSON. The
// redaction comes before the encoding so that JSON escaping cannot hide a
// secret from the redactor.
func (s *Store) encodeMap(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[s.r(k)] = s.r(v)
	}
	b, err := json.Marshal(out)
	if err != nil { // a map of strings always encodes
		panic(err)
	}
	return string(b)
}

// decodeMap is the inverse of encodeMap; an empty map decodes as nil.
func decodeMap(v string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// nanos is t as stored: unix nanoseconds, NULL for the zero time.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// mustAffect turns an update that touched no row into ErrNotFound.
func mustAffect(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}
