package secret

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Finding is a literal that looks like a secret. Offset and Length locate
// it in the linted text, in bytes. Message says what it looks like and
// what to do; it never holds the whole literal, at most a known prefix or
// its first six characters.
type Finding struct {
	Offset  int
	Length  int
	Kind    string
	Message string
}

// Finding kinds.
const (
	KindNGCKey      = "ngc-api-key"
	KindAWSKeyID    = "aws-access-key-id"
	KindHFToken     = "huggingface-token"
	KindGitHubToken = "github-token"
	KindSecretKey   = "secret-key"
	KindSlackToken  = "slack-token"
	KindPrivateKey  = "private-key"
	KindAssignment  = "assignment"
	KindURLPassword = "url-password"
	KindHighEntropy = "high-entropy"
)

const advice = "declare it under secrets: and pass it with env:"

// token is a recognisable key format.
type token struct {
	kind  string
	re    *regexp.Regexp
	what  string              // "an NGC API key"
	valid func(m string) bool // optional extra check on the match
	// need lists literals of which every match holds one: a text holding
	// none is not searched (most plan strings hold none, and the regular
	// expressions are the bulk of linting a large plan).
	need []string
}

var tokens = []token{
	{kind: KindNGCKey, re: regexp.MustCompile(`\bnvapi-[A-Za-z0-9_-]{16,}`), what: "an NGC API key", need: []string{"nvapi-"}},
	{kind: KindAWSKeyID, re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), what: "an AWS access key id", need: []string{"AKIA", "ASIA"}},
	{kind: KindHFToken, re: regexp.MustCompile(`\bhf_[A-Za-z0-9]{20,}`), what: "a Hugging Face token", need: []string{"hf_"}},
	{kind: KindGitHubToken, re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`), what: "a GitHub token", need: []string{"_"}},
	{kind: KindSecretKey, re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`), what: "a secret API key", need: []string{"sk-"}, valid: func(m string) bool {
		return strings.ContainsAny(m[3:], digits) && strings.ContainsAny(m[3:], letters)
	}},
	{kind: KindSlackToken, re: regexp.MustCompile(`\bxox[abpsr]-[A-Za-z0-9-]{10,}`), what: "a Slack token", need: []string{"xox"}},
}

const (
	digits  = "0123456789"
	letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

var (
	privateKeyRE = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)
	privateEndRE = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY-----`)
	// assignRE matches NAME=value and --name=value; group 1 is the name,
	// group 2 the value (quoted or up to a shell metacharacter).
	assignRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.$-])(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=("[^"]*"|'[^']*'|[^\s"'` + "`" + `;&|<>()]*)`)
	// urlPassRE matches scheme://user:password@; group 1 is the password.
	urlPassRE = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@`)
	uuidRE    = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
)

// Lint returns the literals in s that look like secrets, ordered by
// offset, at most one finding per stretch of text:
//   - known key formats: NGC (nvapi-…), AWS access key ids (AKIA…,
//     ASIA…), Hugging Face (hf_…), GitHub (ghp_…, github_pat_…), sk-…,
//     Slack (xoxb-…), PEM private keys;
//   - NAME=literal and --name=literal where the name ends in SECRET,
//     PASSWORD, PASSWD, TOKEN, APIKEY, CREDENTIAL(S), or API_KEY,
//     ACCESS_KEY, SECRET_KEY, PRIVATE_KEY, AUTH_KEY, NGC_KEY (any case,
//     _ - . or camelCase separators); $VAR, ${VAR}, $(…) and ${{ … }}
//     values, booleans and <placeholders> pass, and so do names such as
//     MAX_TOKENS or SECRET_NAME;
//   - URLs with a literal password (scheme://user:pass@);
//   - random-looking strings: at least 32 characters of [A-Za-z0-9+/_-]
//     (with trailing =), letters and digits, Shannon entropy ≥ 4 bits per
//     character; hex digests (32, 40, 64 or 128 hex digits, or after
//     "sha256:" and the like), UUIDs, and identifiers or paths made of
//     word-like parts (resnet18, LEVIR-CD, 20240101) pass.
func Lint(s string) []Finding {
	var out []Finding
	add := func(f Finding) {
		for _, g := range out {
			if f.Offset < g.Offset+g.Length && g.Offset < f.Offset+f.Length {
				return
			}
		}
		out = append(out, f)
	}
	for _, t := range tokens {
		if !containsAny(s, t.need) {
			continue
		}
		for _, m := range t.re.FindAllStringIndex(s, -1) {
			lit := s[m[0]:m[1]]
			if t.valid != nil && !t.valid(lit) {
				continue
			}
			add(Finding{m[0], m[1] - m[0], t.kind, fmt.Sprintf("looks like %s (%s…); %s", t.what, knownPrefix(lit), advice)})
		}
	}
	if strings.Contains(s, "PRIVATE KEY") {
		for _, m := range privateKeyRE.FindAllStringIndex(s, -1) {
			end := m[1]
			if e := privateEndRE.FindStringIndex(s[end:]); e != nil {
				end += e[1]
			}
			add(Finding{m[0], end - m[0], KindPrivateKey,
				"looks like a private key (-----BEGIN … PRIVATE KEY-----); keep key files out of the plan and copy them to the instance"})
		}
	}
	if strings.Contains(s, "=") {
		for _, m := range assignRE.FindAllStringSubmatchIndex(s, -1) {
			name, value := s[m[2]:m[3]], s[m[4]:m[5]]
			if !secretName(name) || !literal(value) {
				continue
			}
			add(Finding{m[4], m[5] - m[4], KindAssignment,
				fmt.Sprintf("%s is set to a literal value; %s", name, advice)})
		}
	}
	if strings.Contains(s, "://") {
		for _, m := range urlPassRE.FindAllStringSubmatchIndex(s, -1) {
			if pass := s[m[2]:m[3]]; strings.HasPrefix(pass, "$") {
				continue
			}
			add(Finding{m[2], m[3] - m[2], KindURLPassword,
				"URL carries a literal password (scheme://user:…@); " + advice})
		}
	}
	for _, t := range entropyCandidates(s) {
		lit := s[t.start:t.end]
		add(Finding{t.start, t.end - t.start, KindHighEntropy,
			fmt.Sprintf("looks like a secret (random-looking string %s…); %s", lit[:6], advice)})
	}
	slices.SortFunc(out, func(a, b Finding) int { return a.Offset - b.Offset })
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// knownPrefix is the fixed prefix of a key format match.
func knownPrefix(lit string) string {
	for _, p := range []string{"github_pat_", "nvapi-", "AKIA", "ASIA", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "sk-"} {
		if strings.HasPrefix(lit, p) {
			return p
		}
	}
	if strings.HasPrefix(lit, "xox") {
		return lit[:5]
	}
	return lit[:min(len(lit), 4)]
}

var (
	secretLast = map[string]bool{"SECRET": true, "PASSWORD": true, "PASSWD": true, "TOKEN": true,
		"APIKEY": true, "CREDENTIAL": true, "CREDENTIALS": true}
	secretPair = map[string]bool{"API": true, "ACCESS": true, "SECRET": true, "PRIVATE": true, "AUTH": true, "NGC": true}
)

// secretName reports whether an assigned name says it holds a secret: its
// last part is SECRET, TOKEN, … or its last two are API_KEY, ACCESS_KEY, ….
func secretName(name string) bool {
	parts := nameParts(strings.TrimLeft(name, "-"))
	n := len(parts)
	if n == 0 {
		return false
	}
	if secretLast[parts[n-1]] {
		return true
	}
	return n >= 2 && parts[n-1] == "KEY" && secretPair[parts[n-2]]
}

// nameParts splits a name at _ - . and lower→upper case changes, upper
// cased.
func nameParts(name string) []string {
	var parts []string
	start := 0
	for i := 0; i <= len(name); i++ {
		split := i == len(name) || name[i] == '_' || name[i] == '-' || name[i] == '.'
		camel := i > 0 && i < len(name) && isUpper(name[i]) && isLower(name[i-1])
		if split || camel {
			if i > start {
				parts = append(parts, strings.ToUpper(name[start:i]))
			}
			start = i
			if split {
				start = i + 1
			}
		}
	}
	return parts
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// literal reports whether an assigned value is a literal that could be a
// secret, not a reference or a placeholder.
func literal(v string) bool {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		v = v[1 : len(v)-1]
	}
	switch {
	case v == "", strings.HasPrefix(v, "$"), strings.HasPrefix(v, "<") && strings.HasSuffix(v, ">"),
		strings.Trim(v, "*") == "", strings.Trim(v, ".…") == "":
		return false
	}
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "null", "none", "nil":
		return false
	}
	return true
}

// run is a half-open range of the linted text.
type run struct{ start, end int }

// entropyCandidates returns the random-looking strings of s.
func entropyCandidates(s string) []run {
	if len(s) < minRandom {
		return nil // no run, nor segment of one, is long enough (most values)
	}
	var out []run
	for _, t := range tokenRuns(s) {
		if t.end-t.start < minRandom {
			continue
		}
		if pathLike(s, t.start) {
			// A path of words is not a secret, but a random segment in
			// it may be: judge each segment alone first.
			n := len(out)
			at := t.start
			for _, seg := range strings.Split(s[t.start:t.end], "/") {
				if randomLooking(s, run{at, at + len(seg)}) {
					out = append(out, run{at, at + len(seg)})
				}
				at += len(seg) + 1
			}
			if len(out) > n {
				continue
			}
		}
		if randomLooking(s, t) {
			out = append(out, t)
		}
	}
	return out
}

// tokenRuns splits s into maximal runs of [A-Za-z0-9+/_-], each with any
// '=' padding that directly follows it.
func tokenRuns(s string) []run {
	var out []run
	for i := 0; i < len(s); {
		if !tokenByte(s[i]) {
			i++
			continue
		}
		start := i
		for i < len(s) && tokenByte(s[i]) {
			i++
		}
		for i < len(s) && s[i] == '=' {
			i++
		}
		out = append(out, run{start, i})
	}
	return out
}

func tokenByte(c byte) bool {
	return isUpper(c) || isLower(c) || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// pathLike reports whether the run at start is a path or the path of a URL.
func pathLike(s string, start int) bool {
	if s[start] == '/' {
		return true
	}
	return start > 0 && strings.IndexByte(":~.@", s[start-1]) >= 0 && strings.IndexByte(s[start:], '/') >= 0
}

// randomLooking reports whether s[t.start:t.end] is long, mixed and
// high-entropy enough to be a generated secret, and not a digest, a UUID
// or an identifier made of words.
// minRandom is the shortest string randomLooking considers.
const minRandom = 32

func randomLooking(s string, t run) bool {
	lit := s[t.start:t.end]
	body := strings.TrimRight(lit, "=")
	if len(body) < minRandom || !strings.ContainsAny(body, digits) || !strings.ContainsAny(body, letters) {
		return false
	}
	if digest(body) {
		return false
	}
	before := strings.ToLower(s[:t.start])
	for _, alg := range []string{"sha256:", "sha512:", "sha384:", "sha1:", "md5:", "blake3:"} {
		if strings.HasSuffix(before, alg) {
			return false
		}
	}
	if uuidRE.MatchString(body) || wordy(body) {
		return false
	}
	return entropy(body) >= 4.0
}

// digest reports whether s is a hex digest: 32, 40, 64 or 128 hex digits.
func digest(s string) bool {
	switch len(s) {
	case 32, 40, 64, 128:
		return isHex(s)
	}
	return false
}

func isHex(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// wordy reports whether every part of s between - _ / + reads as words
// or numbers (resnet18, LEVIR, e89b, 20240101, Cityscapes,
// TrainingDataset2024) or is a hex digest. A generated token almost always has a part that
// does not (aZ3kQ9, XUtn).
func wordy(s string) bool {
	for _, p := range strings.FieldsFunc(s, func(c rune) bool { return c == '-' || c == '_' || c == '/' || c == '+' }) {
		if !wordPart(p) && !digest(p) {
			return false
		}
	}
	return true
}

// wordPart reports whether p is a number, a short single-case word with
// digits (resnet18, e89b), or camel-case humps that each read as a word
// (Training, Dataset2024) or an acronym (LEVIR, V2).
func wordPart(p string) bool {
	upper, lower := false, false
	for i := range len(p) {
		upper = upper || isUpper(p[i])
		lower = lower || isLower(p[i])
	}
	if !(upper && lower) && (len(p) <= 12 || !strings.ContainsAny(p, digits)) {
		return true
	}
	start := 0
	for i := 1; i <= len(p); i++ {
		if i < len(p) && !(isUpper(p[i]) && !isUpper(p[i-1])) {
			continue
		}
		if !hump(p[start:i]) {
			return false
		}
		start = i
	}
	return true
}

// hump reports whether h reads [A-Z]?[a-z]{2,}[0-9]* or [A-Z]+[0-9]*.
func hump(h string) bool {
	i := 0
	for i < len(h) && isUpper(h[i]) {
		i++
	}
	caps := i
	for i < len(h) && isLower(h[i]) {
		i++
	}
	if lower := i - caps; lower > 0 && (caps > 1 || lower < 2) || caps == 0 && lower == 0 {
		return false
	}
	for i < len(h) && '0' <= h[i] && h[i] <= '9' {
		i++
	}
	return i == len(h)
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := range len(s) {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
