package ssh

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// dest is an instance's Ref taken apart: ssh gets the host as its
// destination and the user and port as -l and -p, so that an IPv6 address
// and an explicit port cannot be confused.
type dest struct {
	user string
	host string // a name, an address, or a config alias
	port int    // 0: ssh's own choice (config or 22)
}

// parseDest reads "user@host:port", "user@host", "host", "host:port",
// "[v6addr]:port", "[v6addr]", a bare IPv6 address or an ssh config alias,
// each optionally with "user@".
func parseDest(ref string) (dest, error) {
	if ref == "" {
		return dest{}, errors.New("empty ssh destination")
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`"'\`, r) {
			return dest{}, fmt.Errorf("ssh destination %q holds a space, quote or control character", ref)
		}
	}
	var d dest
	rest := ref
	if i := strings.LastIndexByte(ref, '@'); i >= 0 {
		d.user, rest = ref[:i], ref[i+1:]
		if d.user == "" {
			return dest{}, fmt.Errorf("ssh destination %q has an empty user name", ref)
		}
	}
	var port string
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return dest{}, fmt.Errorf("ssh destination %q: no ] after [", ref)
		}
		d.host = rest[1:end]
		switch after := rest[end+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
			if port == "" {
				return dest{}, fmt.Errorf("ssh destination %q: empty port", ref)
			}
		default:
			return dest{}, fmt.Errorf("ssh destination %q: %q after ]", ref, after)
		}
	case strings.Count(rest, ":") == 1:
		d.host, port, _ = strings.Cut(rest, ":")
		if port == "" {
			return dest{}, fmt.Errorf("ssh destination %q: empty port", ref)
		}
	default: // a name, or a bare IPv6 address (two or more colons)
		d.host = rest
	}
	if d.host == "" {
		return dest{}, fmt.Errorf("ssh destination %q has no host", ref)
	}
	if strings.HasPrefix(d.host, "-") || strings.HasPrefix(d.user, "-") {
		return dest{}, fmt.Errorf("ssh destination %q starts with '-'", ref)
	}
	if strings.ContainsAny(d.host, "@[]/") {
		return dest{}, fmt.Errorf("ssh destination %q: host %q is not a name or address", ref, d.host)
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || port[0] == '+' {
			return dest{}, fmt.Errorf("ssh destination %q: port %q is not a number from 1 to 65535", ref, port)
		}
		d.port = p
	}
	return d, nil
}

// args returns the ssh options that carry d's user and port.
func (d dest) args() []string {
	var a []string
	if d.port != 0 {
		a = append(a, "-p", strconv.Itoa(d.port))
	}
	if d.user != "" {
		a = append(a, "-l", d.user)
	}
	return a
}
