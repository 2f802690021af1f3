package steps

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/taoflow/taoflow/secret"
)

// secretEnv is how every step hands secrets to a remote command (docs/design.md §10).
// For the given names, in order and without repeats, it returns a script
// prelude (scripts/secrets.sh) that reads each value from stdin, one line
// each, and exports it, and the stdin bytes to send with the script: each
// value followed by a newline. The values are never part of the script,
// so they are on no argv, here or on the instance; a stdin that ends early
// makes the script exit 97. A name that is not resolved in Config.Secrets
// is an error naming it (never showing a value). No names give an empty
// prelude and a nil stdin.
//
// Names the plan lists under platform.instance_env are already in the
// instance's environment (Brev secrets): they are neither read nor sent,
// which is what lets a step with secrets run over `brev exec`, which has no
// stdin.
func (s *Steps) secretEnv(names []string) (prelude string, stdin []byte, err error) {
	read := s.sentSecrets(names)
	for _, name := range read {
		if !secret.ValidName(name) {
			return "", nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("secret name %q is not a valid environment variable name", name)}
		}
		v, ok := s.cfg.Secrets.Value(name)
		if !ok {
			return "", nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("secret %s has no value: list it under secrets: and set it in taoflow's environment", name)}
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", nil, &Error{Class: ClassInvalidConfig, Msg: fmt.Sprintf("secret %s is not a single-line value", name)}
		}
		stdin = append(stdin, v...)
		stdin = append(stdin, '\n')
	}
	return readSecrets(read), stdin, nil
}

// sentSecrets is the one rule for which of names a command reads from its
// stdin, in order: each once, and none that the plan lists under
// platform.instance_env (those are in the instance's environment already).
// secretEnv sends their values; the preview (withSecrets) names them.
func (s *Steps) sentSecrets(names []string) []string {
	var read []string
	seen := map[string]bool{}
	if s.cfg.Plan != nil {
		for _, n := range s.cfg.Plan.Platform.InstanceEnv {
			seen[n.Name] = true
		}
	}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		read = append(read, name)
	}
	return read
}

// readSecrets is the prelude that reads the secrets names from stdin and
// exports them ("" for none).
func readSecrets(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return script(Params{"tf_secrets": words(names...), "tf_exit_nosecret": strconv.Itoa(exitNoSecret)}, "secrets")
}

// exitNoSecret is the exit code of a script whose stdin ended before all its
// secrets were read.
const exitNoSecret = 97
