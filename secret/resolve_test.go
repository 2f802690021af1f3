package secret

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolve(t *testing.T) {
	const key = "nvapi-0123456789abcdefXYZ"
	tests := map[string]struct {
		names     []string
		lookup    func(string) (string, bool)
		wantNames []string
		wantErr   string // whole error text
		missing   []string
	}{
		"all present": {
			names:     []string{"NGC_KEY", "AWS_SECRET_ACCESS_KEY"},
			lookup:    env("NGC_KEY", key, "AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG", "OTHER", "x"),
			wantNames: []string{"AWS_SECRET_ACCESS_KEY", "NGC_KEY"},
		},
		"none asked": {wantNames: []string{}, lookup: env()},
		"duplicates resolved once": {
			names:     []string{"NGC_KEY", "NGC_KEY"},
			lookup:    env("NGC_KEY", key),
			wantNames: []string{"NGC_KEY"},
		},
		"every missing name in one error": {
			names:   []string{"NGC_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
			lookup:  env("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY", ""),
			wantErr: "missing secrets: NGC_KEY, AWS_SECRET_ACCESS_KEY (set them in taoflow's environment)",
			missing: []string{"NGC_KEY", "AWS_SECRET_ACCESS_KEY"},
		},
		"newline rejected without showing the value": {
			names:   []string{"NGC_KEY"},
			lookup:  env("NGC_KEY", key+"\n"),
			wantErr: "secret NGC_KEY contains a line break; secrets must be single-line values",
		},
		"NUL rejected": {
			names:   []string{"TOKEN"},
			lookup:  env("TOKEN", "abc\x00def"),
			wantErr: "secret TOKEN contains a NUL byte",
		},
		"all problems at once": {
			names:   []string{"A", "B", "9X", "C"},
			lookup:  env("B", "two\r\nlines", "C", "ok-value"),
			wantErr: "missing secrets: A (set them in taoflow's environment)\nsecret B contains a line break; secrets must be single-line values\ninvalid secret name \"9X\": use letters, digits and _, not starting with a digit",
			missing: []string{"A"},
		},
		"shell syntax in a name": {
			names:   []string{"X;rm"},
			lookup:  env(),
			wantErr: `invalid secret name "X;rm": use letters, digits and _, not starting with a digit`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := Resolve(tc.names, tc.lookup)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Resolve() = %v, want error %q", s.Names(), tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("error:\n%s\nwant:\n%s", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "two") {
					t.Errorf("error shows a secret value: %s", err)
				}
				var me *MissingError
				if errors.As(err, &me) {
					if diff := cmp.Diff(tc.missing, me.Names); diff != "" {
						t.Errorf("MissingError.Names (-want +got):\n%s", diff)
					}
				} else if tc.missing != nil {
					t.Errorf("error %v is not a *MissingError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNames, s.Names()); diff != "" {
				t.Errorf("Names() (-want +got):\n%s", diff)
			}
			if s.Len() != len(tc.wantNames) {
				t.Errorf("Len() = %d, want %d", s.Len(), len(tc.wantNames))
			}
			for _, n := range tc.wantNames {
				want, _ := tc.lookup(n)
				if got, ok := s.Value(n); !ok || got != want {
					t.Errorf("Value(%s) = %q, %v", n, got, ok)
				}
			}
		})
	}
}

func TestResolveDefaultsToEnvironment(t *testing.T) {
	t.Setenv("TAOFLOW_TEST_SECRET", "from-the-environment")
	s, err := Resolve([]string{"TAOFLOW_TEST_SECRET"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Value("TAOFLOW_TEST_SECRET"); v != "from-the-environment" {
		t.Errorf("Value = %q", v)
	}
}

func TestSetRedactorAndTooShort(t *testing.T) {
	s, err := Resolve([]string{"LONG", "PIN"}, env("LONG", "long-secret-value", "PIN", "123"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PIN"}, s.TooShort()); diff != "" {
		t.Errorf("TooShort() (-want +got):\n%s", diff)
	}
	if got := s.Redactor().Redact("a long-secret-value and 123"); got != "a *** and 123" {
		t.Errorf("Redact = %q", got)
	}
	var none *Set
	if none.Len() != 0 || none.Names() != nil || none.Redactor().Redact("x") != "x" {
		t.Error("nil *Set is not empty")
	}
	if _, ok := none.Value("X"); ok {
		t.Error("nil *Set has a value")
	}
}
