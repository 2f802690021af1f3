package brev

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// How brev is logged in (Login): a user (a browser or token login, whose
// `brev ls` shows the user's own instances and those shared with them) or
// an API key (whose `brev ls` shows every instance of the key's org).
const (
	LoginUser   = "user"
	LoginAPIKey = "api-key"
)

// Login says how the brev CLI of b is logged in, from
// $HOME/.brev/credentials.json: LoginAPIKey when it names an API key's org
// (`brev login --api-key … --org-id …` writes api_key_org_id), LoginUser
// when it holds credentials without one, "" when it cannot tell (no file:
// logged out, or another HOME). Only api_key_org_id, which is no secret, is
// decoded; the tokens and the key are never kept or shown.
func (b *Brev) Login() string {
	if b.cfg.Home == "" {
		return ""
	}
	f, err := os.Open(filepath.Join(b.cfg.Home, ".brev", "credentials.json"))
	if err != nil {
		return ""
	}
	defer f.Close()
	var c struct {
		OrgID string `json:"api_key_org_id"`
	}
	// A credentials file is a few hundred bytes; a huge one is not brev's.
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&c); err != nil {
		return ""
	}
	if c.OrgID != "" {
		return LoginAPIKey
	}
	return LoginUser
}

// ValidName reports whether name is one brev accepts for an instance (and
// taoflow passes to it): what reap --name checks before asking brev.
func ValidName(name string) bool { return validName(name) }
