package plan

import (
	"slices"
	"strings"
)

// The checks of the secrets a plan's steps send, declared and implied (the
// AWS keys of an s3:// copy) (check.go runs them).

func (c *checker) secretsDeclared() {
	declared := map[string]bool{}
	for _, s := range c.p.Secrets {
		if declared[s.Name] {
			continue
		}
		declared[s.Name] = true
	}
	for _, n := range c.p.Platform.InstanceEnv {
		if !declared[n.Name] {
			c.d.errorf(n.Pos, "instance_env names %q, which is not declared under secrets:", n.Name)
		}
	}
}

func (c *checker) declared(name string) bool {
	return slices.ContainsFunc(c.p.Secrets, func(n Name) bool { return n.Name == name })
}

// stepSecrets returns the secret names a step sends to its instance, with
// the position to blame.
func (c *checker) stepSecrets(s *Step) []Name {
	switch s.Uses {
	case KindRun, KindUploadS3, KindDownloadS3:
		if env := s.With.Get("env"); env != nil {
			return names(env)
		}
		if s.Uses != KindRun {
			// The AWS CLI's own names, when with.env names none: the two
			// keys are needed for an s3:// URL (impliedSecrets), the token
			// goes along when declared.
			var out []Name
			for _, n := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
				if c.declared(n) {
					out = append(out, Name{Name: n, Pos: s.IDPos})
				}
			}
			return out
		}
	case KindNGCAuth:
		if v := s.With.Get("secret"); v != nil {
			return []Name{{Name: v.Text, Pos: v.Pos}}
		}
		return []Name{{Name: "NGC_KEY", Pos: s.UsesPos}}
	}
	return nil
}

// DefaultAWSSecrets are the secrets an upload-s3 or download-s3 step with
// an s3:// URL and no with.env sends to the AWS CLI: its own variable
// names for the keys. They must be declared, as with.env's must.
var DefaultAWSSecrets = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

// s3URL returns the value of an upload-s3's to or a download-s3's from
// when it is an s3:// URL (vars substituted), and its key.
func (c *checker) s3URL(s *Step) (*Value, string) {
	key := "to"
	switch s.Uses {
	case KindUploadS3:
	case KindDownloadS3:
		key = "from"
	default:
		return nil, ""
	}
	v := s.With.Get(key)
	if v == nil || v.Kind != Scalar {
		return nil, ""
	}
	text := v.Text
	if HasExpr(text) {
		t, err := ParseTemplate(text)
		if err != nil {
			return nil, ""
		}
		text = t.Render(func(r Ref) (string, bool) {
			if r.NS == NSVars {
				return c.p.Var(r.Name)
			}
			return "", false
		}, nil)
	}
	if !strings.HasPrefix(text, "s3://") {
		return nil, ""
	}
	return v, key
}
