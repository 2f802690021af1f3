package steps

import (
	"bytes"
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/taoflow/taoflow/internal/shellquote"
)

// The remote shell taoflow runs on instances lives in scripts/*.sh, one
// file per script or function library, checked by `shellcheck -s sh` in
// `make lint`. Go never formats values into a script's text: script()
// puts a prelude of quoted assignments in front of the files, and the
// scripts read their parameters as variables. Each file names the
// parameters it reads in its header comment.
//
//go:embed scripts/*.sh
var scriptFS embed.FS

// Params are a script's parameters: shell variable name → value. Every
// value arrives as one shell word (shellquote), whatever it holds.
type Params map[string]string

// paramName is what a parameter may be called: a plain shell variable,
// not one of the shell's own (those are upper case).
var paramName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// script returns the prelude setting params followed by the named
// embedded scripts (scripts/NAME.sh), in order. It panics on a name
// that is not embedded or a parameter name that is not a plain
// lower-case shell variable: both are programming errors, caught by the
// first test that renders the script.
func script(params Params, names ...string) string {
	var b strings.Builder
	keys := make([]string, 0, len(params))
	for k := range params {
		if !paramName.MatchString(k) {
			panic(fmt.Sprintf("steps: script parameter %q is not a lower-case shell variable name", k))
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + shellquote.Quote(params[k]) + "\n")
	}
	for _, n := range names {
		body, err := scriptFS.ReadFile("scripts/" + n + ".sh")
		if err != nil {
			panic(fmt.Sprintf("steps: no embedded script %q: %v", n, err))
		}
		body = dropHeader(body)
		b.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// dropHeader removes a script's leading comment lines (its header: what
// it does and its parameters, for the reader of scripts/ and shellcheck),
// which the instance's shell has no use for. Comments further down stay.
func dropHeader(body []byte) []byte {
	for len(body) > 0 && body[0] == '#' {
		i := bytes.IndexByte(body, '\n')
		if i < 0 {
			return nil
		}
		body = body[i+1:]
	}
	return body
}

// words writes a list as one parameter value: each item as one shell word
// (shellquote), separated by spaces. A script turns it back into its
// positional parameters, item for item whatever they hold, with
//
//	eval "set -- $tf_list"
//
// which is safe because every item is quoted: eval only removes the
// quotes that Quote added. Lists of a fixed stride (a poll's ID OFFSET
// RESULTS triples) are read with shift.
func words(items ...string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = shellquote.Quote(it)
	}
	return strings.Join(q, " ")
}

// boolParam is a yes/no parameter as the scripts test it: "1" or "0".
func boolParam(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
