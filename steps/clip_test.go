package steps

import (
	"strings"
	"testing"

	"github.com/taoflow/taoflow/platform"
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
		"progress message": progressLine(`{"message": "`+straddle(100)+`"}`, s.redact).Line,
		"progress eta":     progressLine(`{"eta": "`+straddle(40)+`"}`, s.redact).Line,
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

// TestStreamLogBounded: output without \n (a \r progress bar, a blob) is
// passed on as it comes instead of held whole, the held part stays
// bounded, nothing is lost, and a secret across a forced cut is still
// redacted whole.
func TestStreamLogBounded(t *testing.T) {
	set, err := secret.Resolve([]string{"S"}, func(string) (string, bool) { return clipSecret, true })
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Secrets: set, Owner: "test:1"})
	var log strings.Builder
	req := Request{Log: &redactWriter{w: &log, r: s.redact}}
	w := &watched{}

	s.streamLog(req, w, []byte("10%\r20%\r30"))
	if got := log.String(); got != "10%\r20%\r" || string(w.partial) != "30" {
		t.Errorf("after a \\r progress bar: log %q, held %q; want the lines ended by \\r passed on", got, w.partial)
	}
	log.Reset()
	w.partial = nil

	// 1 MiB without a line end, the secret placed across the first
	// maxPartial boundary, in chunks the size of a poll's.
	blob := strings.Repeat("x", maxPartial-5) + clipSecret + strings.Repeat("y", 1<<20)
	for i := 0; i < len(blob); i += 4096 {
		s.streamLog(req, w, []byte(blob[i:min(i+4096, len(blob))]))
		if len(w.partial) > maxPartial+4096 {
			t.Fatalf("%d bytes held back after %d bytes of output", len(w.partial), i+4096)
		}
	}
	s.flushLog(req, w)
	got := strings.ReplaceAll(log.String(), "\n", "")
	if p := leakedPrefix(got); p != "" {
		t.Errorf("the node log holds the secret's prefix %q", p)
	}
	want := strings.Replace(blob, clipSecret, secret.Mask, 1)
	if got != want {
		t.Errorf("the node log holds %d bytes, want the %d of the output (secret masked)", len(got), len(want))
	}
}

// TestCutOutputDropsPartialLine: output a platform cut at its capture
// limit in the middle of a secret loses the rest of that line, so the
// secret's tail, which the redactor cannot recognise, goes nowhere.
func TestCutOutputDropsPartialLine(t *testing.T) {
	tail := platform.NewTail(64)
	_, _ = tail.Write([]byte(strings.Repeat("a", 100) + "key=" + clipSecret + "\nlast line\n"))
	out := string(dropCutLine(tail.Bytes()))
	if strings.Contains(out, clipSecret[len(clipSecret)-8:]) {
		t.Errorf("the cut line's tail of the secret survived: %q", out)
	}
	if !strings.HasPrefix(out, "[taoflow: output truncated") || !strings.HasSuffix(out, "\nlast line\n") {
		t.Errorf("the marker or the whole lines after the cut were lost: %q", out)
	}
	if got := string(dropCutLine([]byte("whole\n"))); got != "whole\n" {
		t.Errorf("uncut output changed: %q", got)
	}
}
