package steps

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/secret"
)

// clipSecret is long enough that the clip boundaries below fall inside it.
const clipSecret = "s3cr3t-VALUE-0123456789abcdef"

// leakedPrefix reports the longest prefix (at least secret.MinRedactLen
// bytes) of clipSecret that text holds, or "".
func leakedPrefix(text string) string {
	for n := len(clipSecret); n >= secret.MinRedactLen; n-- {
		if strings.Contains(text, clipSecret[:n]) {
			return clipSecret[:n]
		}
	}
	return ""
}

// TestClipAfterRedact puts a secret across the clip boundary of every
// place steps cut a text the job or a tool wrote (the progress message at
// 100 bytes, an eta at 40, a last stderr line and a docker error at 300, the
// probe output at 80): no prefix of it may survive, since a cut made before
// redaction leaves a prefix that no longer matches the secret.
func TestClipAfterRedact(t *testing.T) {
	set, err := secret.Resolve([]string{"S"}, func(string) (string, bool) { return clipSecret, true })
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Secrets: set, Owner: "test:1"})
	straddle := func(limit int) string { return strings.Repeat("x", limit-10) + clipSecret + " tail" }
	got := map[string]string{
		"progress message": progressLine(`{"message": "`+straddle(100)+`"}`, s.redact),
		"progress eta":     progressLine(`{"eta": "`+straddle(40)+`"}`, s.redact),
		"last line":        s.lastLine([]byte("first\n" + straddle(300) + "\n")),
		"docker error":     s.dockerError([]byte("docker: " + straddle(300) + "\nRun 'docker run --help' for more information\n")),
		"probe output":     s.redact.Clip(straddle(80), 80),
	}
	for name, text := range got {
		if p := leakedPrefix(text); p != "" {
			t.Errorf("%s: %q holds the secret's prefix %q", name, text, p)
		}
		if !strings.HasSuffix(text, "…") && !strings.Contains(text, secret.Mask) {
			t.Errorf("%s: %q is neither clipped nor redacted", name, text)
		}
	}
}
