package steps

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/plan"
)

// TestNGCAuthUnreachable: a registry that cannot be reached — its name does
// not resolve, nothing listens, its TLS certificate is not trusted — is
// "registry unreachable", told apart from a bad key (TestNGCAuthFails), with
// the real docker daemon's own errors.
func TestNGCAuthUnreachable(t *testing.T) {
	tests := map[string]struct {
		registry func(t *testing.T) string
		wantWhy  string
	}{
		"name does not resolve": {
			registry: func(*testing.T) string { return "registry.taoflow-test.invalid" },
			wantWhy:  "(DNS",
		},
		"nothing listens": {
			registry: func(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testrig.FreePort(t)) },
			wantWhy:  "(connection refused)",
		},
		"certificate not trusted": {
			registry: untrustedTLSRegistry,
			wantWhy:  "(TLS",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			registry := tt.registry(t)
			const key = "nvapi-fake-" + "k3yk3yk3yk3yk3yk3yk3y"
			e := newDockerEnv(t, nil, func(c *Config) { c.Secrets = testSecrets(t, "NGC_KEY", key) })
			log, err := e.do(t.Context(), plan.KindNGCAuth, with("registry", registry))
			se := stepError(t, err)
			if se.Class != ClassRegistryUnreachable {
				t.Errorf("error = %v, want class %q\nlog:\n%s", err, ClassRegistryUnreachable, log)
			}
			for _, w := range []string{"docker login " + registry, "cannot reach the registry " + tt.wantWhy, "the key in NGC_KEY was not checked"} {
				if !strings.Contains(se.Msg, w) {
					t.Errorf("message %q lacks %q", se.Msg, w)
				}
			}
			if strings.Contains(se.Msg, "check the key") {
				t.Errorf("message %q blames the key", se.Msg)
			}
			if strings.Contains(err.Error()+log.String(), key) {
				t.Errorf("the key leaked: %v\n%s", err, log)
			}
		})
	}
}

// untrustedTLSRegistry serves HTTPS with a certificate no one trusts on a
// non-loopback address of this host (the Docker engine trusts any
// certificate of a loopback registry), and returns its host:port.
func untrustedTLSRegistry(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var ip net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Fatal("this host has no non-loopback IPv4 address to serve the TLS registry on")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return l.Addr().String()
}

// TestUnreachableWhy: the classification of docker's errors, including
// those the rig can't produce (timeouts, resets).
func TestUnreachableWhy(t *testing.T) {
	tests := map[string]struct{ stderr, want string }{
		"dns":         {`Error response from daemon: Get "https://nvcr.io/v2/": dial tcp: lookup nvcr.io on 127.0.0.53:53: no such host`, "DNS: no such host"},
		"dns failure": {`Get "https://nvcr.io/v2/": dial tcp: lookup nvcr.io on 10.0.0.2:53: server misbehaving`, "DNS"},
		"refused":     {`Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused`, "connection refused"},
		"timeout":     {`Get "https://nvcr.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`, "connection timed out"},
		"tls":         {`Get "https://10.0.0.5:5000/v2/": tls: failed to verify certificate: x509: certificate signed by unknown authority`, "TLS certificate"},
		"401 in port": {`Error response from daemon: Get "https://192.0.2.2:40151/v2/": x509: certificate is valid for 127.0.0.1, ::1, not 192.0.2.2`, "TLS certificate"},
		"plain http":  {`Get "https://10.0.0.5:5000/v2/": http: server gave HTTP response to HTTPS client`, "TLS: the registry speaks plain HTTP"},
		"bad key":     {`Error response from daemon: Get "https://nvcr.io/v2/": unauthorized: authentication required`, ""},
		"401":         {`Error response from daemon: login attempt to http://127.0.0.1:5000/v2/ failed with status: 401 Unauthorized`, ""},
		"other":       {`Error: Cannot perform an interactive login from a non TTY device`, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := unreachableWhy([]byte(tt.stderr)); got != tt.want {
				t.Errorf("unreachableWhy = %q, want %q", got, tt.want)
			}
		})
	}
}
