package ssh

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDest(t *testing.T) {
	tests := map[string]struct {
		ref  string
		want dest
		args []string
	}{
		"alias":             {ref: "tf-test", want: dest{host: "tf-test"}},
		"host":              {ref: "gpu.example.com", want: dest{host: "gpu.example.com"}},
		"user at host":      {ref: "ubuntu@10.0.0.7", want: dest{user: "ubuntu", host: "10.0.0.7"}, args: []string{"-l", "ubuntu"}},
		"user at host port": {ref: "ubuntu@10.0.0.7:2222", want: dest{user: "ubuntu", host: "10.0.0.7", port: 2222}, args: []string{"-p", "2222", "-l", "ubuntu"}},
		"host port":         {ref: "box:22", want: dest{host: "box", port: 22}, args: []string{"-p", "22"}},
		"bracketed v6 port": {ref: "[::1]:2200", want: dest{host: "::1", port: 2200}, args: []string{"-p", "2200"}},
		"user bracketed v6": {ref: "root@[fe80::1%eth0]:22", want: dest{user: "root", host: "fe80::1%eth0", port: 22}, args: []string{"-p", "22", "-l", "root"}},
		"bracketed v6 bare": {ref: "[2001:db8::2]", want: dest{host: "2001:db8::2"}},
		"bare v6":           {ref: "2001:db8::2", want: dest{host: "2001:db8::2"}},
		"user bare v6":      {ref: "me@::1", want: dest{user: "me", host: "::1"}, args: []string{"-l", "me"}},
		"at sign in user":   {ref: "a@b@host", want: dest{user: "a@b", host: "host"}, args: []string{"-l", "a@b"}},
		"highest port":      {ref: "h:65535", want: dest{host: "h", port: 65535}, args: []string{"-p", "65535"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseDest(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(dest{})); diff != "" {
				t.Errorf("parseDest(%q) (-want +got):\n%s", tt.ref, diff)
			}
			if diff := cmp.Diff(tt.args, got.args()); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDestRefuses(t *testing.T) {
	tests := map[string]string{
		"empty":              "",
		"empty user":         "@host",
		"no host":            "user@",
		"option as host":     "-oProxyCommand=x",
		"option as user":     "-x@host",
		"space":              "host name",
		"quote":              "ho'st",
		"newline":            "host\nx",
		"port zero":          "host:0",
		"port too big":       "host:65536",
		"port not a number":  "host:ssh",
		"signed port":        "host:+22",
		"empty port":         "host:",
		"unclosed bracket":   "[::1:22",
		"junk after bracket": "[::1]x",
		"empty bracket port": "[::1]:",
		"empty brackets":     "[]:22",
		"slash":              "host/x",
	}
	for name, ref := range tests {
		t.Run(name, func(t *testing.T) {
			if d, err := parseDest(ref); err == nil {
				t.Errorf("parseDest(%q) = %+v, want an error", ref, d)
			}
		})
	}
}
