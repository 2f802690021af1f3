package brev

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Workspace is one instance as `brev ls --json` shows it. Every field is a
// string, possibly empty.
type Workspace struct {
	// Name is the instance name, also its ssh alias after `brev refresh`.
	Name string `json:"name"`
	// ID is Brev's id for the instance.
	ID string `json:"id"`
	// Status is the lifecycle state: RUNNING, DEPLOYING, STARTING,
	// STOPPING, STOPPED, DELETING, FAILURE, or UNHEALTHY (a RUNNING
	// instance whose health check fails).
	Status string `json:"status"`
	// BuildStatus is PENDING, BUILDING, COMPLETED, CREATE_FAILED or empty.
	// It can stick at a wrong value on a healthy instance, so taoflow only
	// reports it.
	BuildStatus string `json:"build_status"`
	// ShellStatus is READY or "NOT READY", computed by brev from Status and
	// BuildStatus; advisory like BuildStatus.
	ShellStatus string `json:"shell_status"`
	// HealthStatus is HEALTHY, UNHEALTHY, UNAVAILABLE or empty.
	HealthStatus string `json:"health_status"`
	// InstanceType is the machine type, e.g. "g5.xlarge".
	InstanceType string `json:"instance_type"`
	// InstanceKind is "gpu", "cpu" or empty.
	InstanceKind string `json:"instance_kind"`
	// GPU is the GPU's name, or "-".
	GPU string `json:"gpu"`
}

// ParseList reads the output of `brev ls --json`. brev v0.6.317–322 prints
// a bare JSON array (the literal null when there is no instance); v0.6.323
// and later print an object {"workspaces": [...]}, with null for none.
// Both shapes are accepted. Anything else — an empty output, a login
// prompt, a banner before the JSON — is an error that quotes the start of
// what brev printed.
func ParseList(out []byte) ([]Workspace, error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		return nil, errors.New("brev ls --json printed nothing; expected a JSON list of instances")
	}
	switch trimmed[0] {
	case 'n':
		if string(trimmed) == "null" {
			return nil, nil
		}
	case '[':
		var ws []Workspace
		if err := json.Unmarshal(trimmed, &ws); err != nil {
			return nil, fmt.Errorf("brev ls --json printed an array that is not a list of instances: %w (output begins %s)", err, quoteStart(trimmed))
		}
		return ws, nil
	case '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &obj); err != nil {
			return nil, fmt.Errorf("brev ls --json printed malformed JSON: %w (output begins %s)", err, quoteStart(trimmed))
		}
		raw, ok := obj["workspaces"]
		if !ok {
			return nil, fmt.Errorf("brev ls --json printed an object without a \"workspaces\" key (output begins %s)", quoteStart(trimmed))
		}
		var ws []Workspace
		if err := json.Unmarshal(raw, &ws); err != nil {
			return nil, fmt.Errorf("brev ls --json: \"workspaces\" is not a list of instances: %w", err)
		}
		return ws, nil
	}
	hint := ""
	if bytes.Contains(trimmed, []byte("logged out")) || bytes.Contains(trimmed, []byte("log in")) {
		hint = "; brev is not logged in: run `brev login`"
	}
	return nil, fmt.Errorf("brev ls --json printed something that is not JSON (output begins %s)%s", quoteStart(trimmed), hint)
}

// quoteStart quotes the first 120 bytes of b, for an error message.
func quoteStart(b []byte) string {
	if len(b) > 120 {
		return fmt.Sprintf("%q…", b[:120])
	}
	return fmt.Sprintf("%q", b)
}

// find returns the workspace named name (or with id name) in ws.
func find(ws []Workspace, name string) (Workspace, bool) {
	for _, w := range ws {
		if w.Name == name {
			return w, true
		}
	}
	for _, w := range ws {
		if w.ID != "" && w.ID == name {
			return w, true
		}
	}
	return Workspace{}, false
}
