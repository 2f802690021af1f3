package secret

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Set holds resolved secrets, name → value. A nil *Set is empty.
type Set struct {
	values map[string]string
}

// MissingError lists the secrets that are not set (or empty) in taoflow's
// environment.
type MissingError struct {
	Names []string // in the order they were asked for
}

// Error reads "missing secrets: A, B (set them in taoflow's environment)".
func (e *MissingError) Error() string {
	return "missing secrets: " + strings.Join(e.Names, ", ") + " (set them in taoflow's environment)"
}

// Resolve looks up every name with lookup (os.LookupEnv when nil). Every
// name must be a valid environment variable name and be set to a non-empty
// single-line value: the errors for all names are returned at once, the
// missing ones as a single *MissingError. Error messages name secrets and
// never show a value. Repeated names are resolved once.
func Resolve(names []string, lookup func(string) (string, bool)) (*Set, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s := &Set{values: make(map[string]string, len(names))}
	var (
		missing []string
		errs    []error
	)
	for _, name := range names {
		if _, dup := s.values[name]; dup || slices.Contains(missing, name) {
			continue
		}
		if !ValidName(name) {
			errs = append(errs, fmt.Errorf("invalid secret name %q: use letters, digits and _, not starting with a digit", name))
			continue
		}
		v, ok := lookup(name)
		switch {
		case !ok || v == "":
			missing = append(missing, name)
			continue
		case strings.ContainsRune(v, '\n') || strings.ContainsRune(v, '\r'):
			errs = append(errs, fmt.Errorf("secret %s contains a line break; secrets must be single-line values", name))
			continue
		case strings.ContainsRune(v, 0):
			errs = append(errs, fmt.Errorf("secret %s contains a NUL byte", name))
			continue
		}
		s.values[name] = v
	}
	if len(missing) > 0 {
		errs = append([]error{&MissingError{Names: missing}}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// ValidName reports whether name can be exported by a POSIX shell.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Names returns the secret names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.values))
	for n := range s.values {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Value returns the value of the secret name.
func (s *Set) Value(name string) (string, bool) {
	if s == nil {
		return "", false
	}
	v, ok := s.values[name]
	return v, ok
}

// Len is the number of secrets.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.values)
}

// TooShort returns, sorted, the names of secrets whose values are shorter
// than MinRedactLen and so are not redacted; callers should warn about them.
func (s *Set) TooShort() []string {
	var short []string
	for _, n := range s.Names() {
		if len(s.values[n]) < MinRedactLen {
			short = append(short, n)
		}
	}
	return short
}

// Redactor returns a Redactor for every value of the set.
func (s *Set) Redactor() *Redactor {
	if s == nil {
		return nil
	}
	values := make([]string, 0, len(s.values))
	for _, n := range s.Names() {
		values = append(values, s.values[n])
	}
	return NewRedactor(values...)
}
