package brev

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/taoflow/taoflow/platform"
)

// Prefix begins the name of every instance taoflow creates on Brev, so that
// `taoflow reap` can find leftovers by name alone.
const Prefix = "tf-"

// maxName is the longest instance name brev create accepts.
const maxName = 63

// InstanceRef is InstanceName for the instance spec describes: the name
// Create gives it (platform.Namer). An existing instance keeps its name.
func (b *Brev) InstanceRef(run string, spec platform.Spec) string {
	if spec.Existing != "" {
		return spec.Existing
	}
	return InstanceName(run, spec.Name)
}

// InstanceName returns the Brev name of plan instance instance of run run:
// "tf-<run>-<instance>". Characters brev does not allow in a name (it wants
// ^[a-zA-Z0-9][a-zA-Z0-9._-]*$) become "-". A name that had to change that
// way, or that is longer than 63 characters, is cut to leave room and ends
// with "-" and 8 hex digits of the SHA-256 of the full, unchanged name, so
// that different runs and instances keep different names. The result
// depends on nothing but its arguments.
func InstanceName(run, instance string) string {
	full := Prefix + run + "-" + instance
	b := []byte(full)
	changed := false
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '-'
			changed = true
		}
	}
	if !changed && len(b) <= maxName {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(b) > maxName-len(suffix) {
		b = b[:maxName-len(suffix)]
	}
	return string(b) + suffix
}

// nameByte reports whether c may appear in a brev instance name.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// validName reports whether brev accepts name as an instance name; every
// name this package puts on a brev command line passes it, so that none
// can be read as a flag.
func validName(name string) bool {
	if name == "" || len(name) > maxName {
		return false
	}
	first := name[0]
	if first == '.' || first == '_' || first == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return false
		}
	}
	return true
}
