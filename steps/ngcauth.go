package steps

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/taoflow/taoflow/plan"
)

// Defaults of an ngc-auth step.
const (
	defaultRegistry  = "nvcr.io"
	defaultNGCUser   = "$oauthtoken" // literal: NGC's user name for API keys
	defaultNGCSecret = "NGC_KEY"
)

// loginScript logs the instance's docker in to registry as user with the
// secret named key, which the prelude has exported (scripts/login.sh):
// the key goes from the shell's memory into docker's stdin and is on no
// command line, and the user name, a parameter, reaches docker as it is
// written ($oauthtoken).
func loginScript(registry, user, key string) string {
	return dockerScript(Params{"tf_registry": registry, "tf_user": user, "tf_key": key}, "login")
}

// manifestScript checks that the logged-in docker may read image, without
// pulling it (scripts/manifest-inspect.sh). A registry on a loopback
// address is reached over plain HTTP (--insecure), as the Docker engine
// allows by default.
func manifestScript(image string) string {
	return dockerScript(Params{"tf_image": image, "tf_insecure": boolParam(loopbackRegistry(image))}, "manifest-inspect")
}

// ngcParams reads and checks the with: of an ngc-auth step, defaults
// filled in.
func ngcParams(w *plan.Value) (registry, user, key, verify string, err error) {
	registry = withString(w, "registry")
	if registry == "" {
		registry = defaultRegistry
	}
	user = withString(w, "username")
	if user == "" {
		user = defaultNGCUser
	}
	key = withString(w, "secret")
	if key == "" {
		key = defaultNGCSecret
	}
	verify = withString(w, "verify_image")
	if strings.HasPrefix(registry, "-") || strings.ContainsAny(registry, " \t\r\n") {
		return "", "", "", "", &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("with.registry: %q is not a registry host", registry)}
	}
	if verify != "" {
		if err := checkImage("with.verify_image", verify); err != nil {
			return "", "", "", "", err
		}
	}
	return registry, user, key, verify, nil
}

// loopbackRegistry reports whether image names a registry on localhost or
// a loopback address.
func loopbackRegistry(image string) bool {
	first, _, ok := strings.Cut(image, "/")
	if !ok {
		return false
	}
	host := first
	if h, _, err := net.SplitHostPort(first); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ngcAuth logs the instance's docker in to the registry (docs/design.md §5), then
// optionally checks access to with.verify_image: a failed login is "auth
// failed" (a bad key), a refused image after a good login is "no
// entitlement".
func (s *Steps) ngcAuth(ctx context.Context, req Request) error {
	registry, user, key, verify, err := ngcParams(req.With)
	if err != nil {
		return err
	}
	prelude, stdin, err := s.secretEnv([]string{key})
	if err != nil {
		return err
	}
	inst := req.Instance
	fmt.Fprintf(req.Log, "docker login %s as %s on %s (the key %s on stdin)\n", registry, user, inst.Name, key)
	res, err := s.exec(ctx, inst, prelude+loginScript(registry, user, key), stdin)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "docker login on %s: %v", inst.Name, err)
	}
	s.logOutput(req, res.Stdout, res.Stderr)
	switch res.ExitCode {
	case 0:
	case exitNoSecret:
		return s.fail(ClassAuthFailed, nil, "docker login %s on %s: the key did not arrive on stdin", registry, inst.Name)
	case exitNoDockerCLI:
		return s.fail(ClassNoDocker, nil, "docker is not installed on %s", inst.Name)
	default:
		if why := unreachableWhy(res.Stderr); why != "" {
			return s.fail(ClassRegistryUnreachable, nil, "docker login %s on %s: cannot reach the registry (%s), so the key in %s was not checked: %s", registry, inst.Name, why, key, s.dockerError(res.Stderr))
		}
		return s.fail(ClassAuthFailed, nil, "docker login %s as %s on %s failed (check the key in %s): %s", registry, user, inst.Name, key, s.dockerError(res.Stderr))
	}
	fmt.Fprintf(req.Log, "logged in to %s\n", registry)
	if verify == "" {
		return nil
	}
	fmt.Fprintf(req.Log, "checking access to %s (docker manifest inspect)\n", verify)
	res, err = s.exec(ctx, inst, manifestScript(verify), nil)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return s.fail(ClassNotReachable, err, "docker manifest inspect on %s: %v", inst.Name, err)
	case res.ExitCode == exitNoDockerCLI:
		return s.fail(ClassNoDocker, nil, "docker is not installed on %s", inst.Name)
	case res.ExitCode != 0 && registryUnreachable(res.Stderr):
		return s.fail(ClassRegistryUnreachable, nil, "logged in to %s, but checking %s could not reach the registry (%s): %s", registry, verify, unreachableWhy(res.Stderr), s.dockerError(res.Stderr))
	case res.ExitCode != 0:
		return s.fail(ClassNoEntitlement, nil, "logged in to %s, but %s is refused (the key's org is not entitled to it, or there is no such image): %s", registry, verify, s.dockerError(res.Stderr))
	}
	fmt.Fprintf(req.Log, "%s is readable\n", verify)
	return nil
}

// logOutput writes a command's stdout and stderr lines to the node log
// (redacted by req.Log).
func (s *Steps) logOutput(req Request, stdout, stderr []byte) {
	for _, b := range [][]byte{stdout, stderr} {
		if t := strings.TrimSpace(string(b)); t != "" {
			fmt.Fprintln(req.Log, t)
		}
	}
}

// unreachableSigns are what docker (the daemon's Go HTTP client) says when
// a registry cannot be reached, by kind: name resolution, connection, TLS.
// A refused key reads "unauthorized" or "401" instead.
var unreachableSigns = []struct{ sign, why string }{
	{"no such host", "DNS: no such host"},
	{"server misbehaving", "DNS"},
	{"lookup ", "DNS"},
	{"connection refused", "connection refused"},
	{"no route to host", "no route to host"},
	{"network is unreachable", "network unreachable"},
	{"i/o timeout", "connection timed out"},
	{"Client.Timeout exceeded", "connection timed out"},
	{"connection reset by peer", "connection reset"},
	{"TLS handshake", "TLS"},
	{"x509: ", "TLS certificate"},
	{"tls: ", "TLS"},
	{"server gave HTTP response to HTTPS client", "TLS: the registry speaks plain HTTP"},
	{"dial tcp", "connection"},
}

// status401 is an HTTP 401 in docker's message, not the digits 401 inside
// a port or an address (":40151" once made a TLS failure read as a refused
// key).
var status401 = regexp.MustCompile(`(^|[^0-9.:])401([^0-9]|$)`)

// registryUnreachable reports whether docker's stderr says the registry
// could not be reached, rather than that it refused the key or the image.
func registryUnreachable(stderr []byte) bool { return unreachableWhy(stderr) != "" }

// unreachableWhy names why the registry could not be reached, or "".
func unreachableWhy(stderr []byte) string {
	msg := string(stderr)
	if strings.Contains(msg, "unauthorized") || status401.MatchString(msg) {
		return ""
	}
	for _, s := range unreachableSigns {
		if strings.Contains(msg, s.sign) {
			return s.why
		}
	}
	return ""
}
