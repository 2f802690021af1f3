package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

const (
	ngcKey = "nvapi-Zq3xT9_kLm2-Pw8vR4sYb7NcD1eF"
	awsKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestRedact(t *testing.T) {
	tests := map[string]struct {
		secrets []string
		in      string
		want    string
	}{
		"plain":                    {[]string{ngcKey}, "key=" + ngcKey + " done", "key=*** done"},
		"every occurrence":         {[]string{ngcKey}, ngcKey + ngcKey[:5] + " " + ngcKey, "***" + ngcKey[:5] + " ***"},
		"base64 std":               {[]string{awsKey}, "v: " + b64(awsKey) + ".", "v: ***."},
		"base64 url":               {[]string{awsKey}, "v: " + base64.URLEncoding.EncodeToString([]byte(awsKey)) + ".", "v: ***."},
		"base64 raw std":           {[]string{"abcde"}, "v: " + base64.RawStdEncoding.EncodeToString([]byte("abcde")) + ".", "v: ***."},
		"base64 raw url":           {[]string{"a?>b~"}, "v: " + base64.RawURLEncoding.EncodeToString([]byte("a?>b~")) + ".", "v: ***."},
		"base64 with echo newline": {[]string{ngcKey}, "v: " + b64(ngcKey+"\n"), "v: ***"},
		"hex lower":                {[]string{ngcKey}, "x" + hex.EncodeToString([]byte(ngcKey)) + "x", "x***x"},
		"hex upper":                {[]string{ngcKey}, "x" + strings.ToUpper(hex.EncodeToString([]byte(ngcKey))) + "x", "x***x"},
		"docker config.json nvcr.io auth": {
			[]string{ngcKey},
			`{"auths":{"nvcr.io":{"auth":"` + b64("$oauthtoken:"+ngcKey) + `"}}}`,
			`{"auths":{"nvcr.io":{"auth":"***"}}}`,
		},
		"json escaped": {[]string{`pa"ss\word<>`}, `{"p":"pa\"ss\\word\u003c\u003e"}`, `{"p":"***"}`},
		"url escaped":  {[]string{"a/b+c=d e"}, "https://x/?k=a%2Fb%2Bc%3Dd+e&z", "https://x/?k=***&z"},
		"each line of a multi-line value": {
			[]string{"line-one-secret\nline-two-secret"},
			"got line-two-secret only",
			"got *** only",
		},
		"overlapping secrets merge": {[]string{"abcdef12", "ef12ghij"}, "xxabcdef12ghijyy", "xx***yy"},
		"nested secrets":            {[]string{"inner", "outer-inner-outer"}, "[outer-inner-outer] [inner]", "[***] [***]"},
		"adjacent secrets merge":    {[]string{"first", "second"}, "firstsecond", "***"},
		"longer first":              {[]string{"token", "token-extended"}, "token-extended", "***"},
		"too short is kept":         {[]string{"abc"}, "abc abc", "abc abc"},
		"exactly four bytes":        {[]string{"abcd"}, "abcd", "***"},
		"empty and nothing":         {[]string{""}, "text", "text"},
		"mask next to a starred secret": {
			[]string{"s3cret", "***tail"},
			"s3cret" + "tail",
			"***",
		},
		"no secret in text": {[]string{ngcKey}, "epoch 3/10 loss=0.12", "epoch 3/10 loss=0.12"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewRedactor(tc.secrets...)
			if got := r.Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := string(r.RedactBytes([]byte(tc.in))); got != tc.want {
				t.Errorf("RedactBytes(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactBase64InsideLongerString checks docker "USER:VALUE" auth
// strings for users taoflow does not know: at every alignment the
// characters that depend only on the value are masked.
func TestRedactBase64InsideLongerString(t *testing.T) {
	r := NewRedactor(ngcKey)
	for _, user := range []string{"a", "al", "ali", "alice", "$oauthtoken", "robot$ci"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			blob := enc.EncodeToString([]byte(user + ":" + ngcKey + "#tail"))
			got := r.Redact(blob)
			if !strings.Contains(got, Mask) {
				t.Errorf("user %q: %q not redacted", user, blob)
			}
			// What is left may show a few bits at each edge, never a run
			// of six characters encoding the key.
			for _, f := range forms(ngcKey)[3:] {
				for i := 0; i+8 <= len(f); i++ {
					if strings.Contains(got, f[i:i+8]) && !strings.Contains(enc.EncodeToString([]byte(user+":")), f[i:i+8]) {
						t.Fatalf("user %q: redacted %q still holds %q of the key's base64", user, got, f[i:i+8])
					}
				}
			}
		}
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if got := r.Redact(ngcKey); got != ngcKey {
		t.Errorf("nil Redact = %q", got)
	}
	if got := string(r.RedactBytes([]byte(ngcKey))); got != ngcKey {
		t.Errorf("nil RedactBytes = %q", got)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, nil)
	write(t, w, ngcKey)
	closeWriter(t, w)
	if buf.String() != ngcKey {
		t.Errorf("nil writer wrote %q", buf.String())
	}
}

func TestRedactConcurrent(t *testing.T) {
	r := NewRedactor(ngcKey, awsKey, "hunter2-password")
	in := strings.Repeat("log "+ngcKey+" and "+b64(awsKey)+" and hunter2-password\n", 50)
	want := r.Redact(in)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := r.Redact(in); got != want {
					t.Error("concurrent Redact differs")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestWriterSplitAtEveryBoundary(t *testing.T) {
	secrets := []string{ngcKey, awsKey}
	r := NewRedactor(secrets...)
	texts := map[string]string{
		"plain":  "before " + ngcKey + " after\n",
		"base64": "auth: " + b64("$oauthtoken:"+ngcKey) + "\n",
		"two":    awsKey + ngcKey,
		"edges":  ngcKey,
	}
	for name, text := range texts {
		want := r.Redact(text)
		for i := 0; i <= len(text); i++ {
			var buf bytes.Buffer
			w := NewWriter(&buf, r)
			for _, part := range []string{text[:i], text[i:]} {
				if n, err := io.WriteString(w, part); err != nil || n != len(part) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != want {
				t.Fatalf("%s split at %d:\n got %q\nwant %q", name, i, buf.String(), want)
			}
		}
	}
}

func TestWriterByteAtATimeAndRandomChunks(t *testing.T) {
	r := NewRedactor(ngcKey, awsKey, "abcdef12", "ef12ghij")
	var text strings.Builder
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		fmt.Fprintf(&text, "line %d ", i)
		switch rng.IntN(5) {
		case 0:
			text.WriteString(ngcKey)
		case 1:
			text.WriteString(b64(awsKey))
		case 2:
			text.WriteString("xxabcdef12ghijyy")
		}
		text.WriteString("\n")
	}
	in := text.String()
	for _, maxChunk := range []int{1, 3, 17, 100, 5000} {
		var buf bytes.Buffer
		w := NewWriter(&buf, r)
		for rest := in; rest != ""; {
			n := min(len(rest), 1+rng.IntN(maxChunk))
			write(t, w, rest[:n])
			rest = rest[n:]
		}
		closeWriter(t, w)
		out := buf.String()
		for _, s := range []string{ngcKey, awsKey, b64(awsKey)[:20], "abcdef12", "ef12ghij", "ghij"} {
			if strings.Contains(out, s) {
				t.Errorf("chunks ≤ %d: output holds %q", maxChunk, s)
			}
		}
		if want := r.Redact(in); out != want {
			t.Errorf("chunks ≤ %d: streamed output differs from Redact", maxChunk)
		}
	}
}

func TestWriterConcurrentWrites(t *testing.T) {
	r := NewRedactor(ngcKey)
	var buf bytes.Buffer
	w := NewWriter(&buf, r)
	var wg sync.WaitGroup
	line := "worker says " + ngcKey + "\n"
	for range 4 {
		wg.Go(func() {
			for range 100 {
				write(t, w, line) // one Write per line: lines stay whole
			}
		})
	}
	wg.Wait()
	closeWriter(t, w)
	if got, want := buf.String(), strings.Repeat("worker says ***\n", 400); got != want {
		t.Errorf("got %d bytes, want %d; contains key: %v", len(got), len(want), strings.Contains(got, ngcKey))
	}
}

func TestWriterPassesCompleteLines(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, NewRedactor(ngcKey))
	write(t, w, "epoch 1 "+ngcKey+"\nepoch 2 ")
	if got, want := buf.String(), "epoch 1 ***\n"; got != want {
		t.Errorf("before Close: %q, want %q", got, want)
	}
	write(t, w, ngcKey[:10])
	write(t, w, ngcKey[10:]+"\n")
	if got, want := buf.String(), "epoch 1 ***\nepoch 2 ***\n"; got != want {
		t.Errorf("second line: %q, want %q", got, want)
	}

	// A value that spans lines must not be cut at a line break.
	buf.Reset()
	two := "first-line-secret\nsecond-line-secret"
	w = NewWriter(&buf, NewRedactor(two))
	write(t, w, "a "+two[:20])
	write(t, w, two[20:]+" b")
	closeWriter(t, w)
	if got, want := buf.String(), "a *** b"; got != want {
		t.Errorf("multi-line value: %q, want %q", got, want)
	}
}

// write writes s to w, reporting a failure (also from a goroutine).
func write(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if n, err := io.WriteString(w, s); err != nil || n != len(s) {
		t.Errorf("Write = %d, %v; want %d", n, err, len(s))
	}
}

func closeWriter(t *testing.T, w io.Closer) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

type failWriter struct{ calls int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls++
	return 0, errors.New("disk full")
}

func TestWriterErrors(t *testing.T) {
	fw := &failWriter{}
	w := NewWriter(fw, NewRedactor(ngcKey))
	long := strings.Repeat("x", 200)
	if _, err := io.WriteString(w, long); err == nil {
		t.Fatal("no error from a failing writer")
	}
	if _, err := io.WriteString(w, long); err == nil || fw.calls != 1 {
		t.Errorf("error not sticky: %v after %d calls", err, fw.calls)
	}

	var buf bytes.Buffer
	w = NewWriter(&buf, NewRedactor(ngcKey))
	write(t, w, "held")
	if buf.Len() != 0 {
		t.Errorf("a possible secret prefix was passed on before Close: %q", buf.String())
	}
	if err := w.Close(); err != nil || buf.String() != "held" {
		t.Errorf("Close = %v, wrote %q", err, buf.String())
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := io.WriteString(w, "late"); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// FuzzRedact checks that no redacted form of any secret (of at least
// MinRedactLen bytes) survives Redact, or the streaming writer, whatever
// the text around it.
func FuzzRedact(f *testing.F) {
	f.Add("nvapi-abcdef0123456789", "hunter22", "log: nvapi-abcdef0123456789 hunter22", 7)
	f.Add("abcd", "cdef", "abcdefabcdcdef", 2)
	f.Add("s3cret", "***tail", "s3crettail", 3)
	f.Add("aaaa", "aaab", "aaaaaaaaaaaab", 1)
	f.Fuzz(func(t *testing.T, s1, s2, text string, chunk int) {
		r := NewRedactor(s1, s2)
		// Put the secrets and an encoding of one in the text too.
		text = text + s1 + text + b64(s2) + s2
		out := r.Redact(text)
		for _, p := range r.patterns {
			if strings.Contains(out, p) {
				t.Fatalf("Redact(%q) = %q still holds %q", text, out, p)
			}
		}
		if strings.Contains(s1+s2, "*") {
			return // a stream has no fixed point across writes
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, r)
		chunk = 1 + max(chunk, -chunk)%64
		for rest := text; rest != ""; {
			n := min(len(rest), chunk)
			write(t, w, rest[:n])
			rest = rest[n:]
		}
		closeWriter(t, w)
		for _, s := range []string{s1, s2} {
			if len(s) >= MinRedactLen && strings.Contains(buf.String(), s) {
				t.Fatalf("stream of %q in chunks of %d = %q still holds %q", text, chunk, buf.String(), s)
			}
		}
	})
}

// BenchmarkRedact redacts 1 MiB of log text holding 5 secrets.
func BenchmarkRedact(b *testing.B) {
	secrets := []string{ngcKey, awsKey, "AKIAIOSFODNN7EXAMPLE", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hunter2-password"}
	r := NewRedactor(secrets...)
	var log strings.Builder
	for i := 0; log.Len() < 1<<20; i++ {
		fmt.Fprintf(&log, "2026-01-02T03:04:05Z epoch %d/100 step %d loss=0.%04d lr=0.0001 eta 01:02:03 results_dir=/results/train\n", i%100, i, i%9973)
		if i%500 == 0 {
			fmt.Fprintf(&log, "env dump: KEY=%s AUTH=%s\n", secrets[i/500%5], b64(secrets[(i/500+1)%5]))
		}
	}
	in := log.String()[:1<<20]
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		_ = r.Redact(in)
	}
}

func BenchmarkWriter(b *testing.B) {
	r := NewRedactor(ngcKey, awsKey)
	line := []byte("2026-01-02T03:04:05Z epoch 3/100 step 12345 loss=0.1234 lr=0.0001 eta 01:02:03\n")
	b.SetBytes(int64(len(line)))
	w := NewWriter(io.Discard, r)
	for b.Loop() {
		_, _ = w.Write(line)
	}
}

func TestClip(t *testing.T) {
	r := NewRedactor("TOPSECRETVALUE")
	tests := map[string]struct {
		in   string
		n    int
		want string
	}{
		"short":                 {"abc", 10, "abc"},
		"secret across the cut": {"0123456789TOPSECRETVALUE", 14, "0123456789***"},
		"secret after the cut":  {"0123456789 TOPSECRETVALUE", 8, "01234567…"},
		"rune boundary":         {"ab€cd", 4, "ab…"},
		"zero":                  {"abc", 0, "…"},
	}
	for name, tt := range tests {
		if got := r.Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("%s: Clip(%q, %d) = %q, want %q", name, tt.in, tt.n, got, tt.want)
		}
	}
}

// TestClipStraddle cuts a text at every point across a secret, and in
// each of its encoded forms: no piece of 8 bytes of the secret (or of the
// form) is ever left in the clipped text, whose length stays bounded.
func TestClipStraddle(t *testing.T) {
	const key = "nvapi-Str4ddl3TheCl1pP01ntXyZ0123456789ab"
	r := NewRedactor(key)
	for _, form := range []string{key, base64.StdEncoding.EncodeToString([]byte(key)), hex.EncodeToString([]byte(key))} {
		text := strings.Repeat("x", 50) + form + " and after"
		for n := 40; n <= len(text)+1; n++ {
			got := r.Clip(text, n)
			if len(got) > n+len("…") {
				t.Errorf("Clip(…, %d) is %d bytes long", n, len(got))
			}
			for i := 0; i+8 <= len(form); i++ {
				if strings.Contains(got, form[i:i+8]) {
					t.Fatalf("Clip(…, %d) = %q holds %q, a piece of the secret", n, got, form[i:i+8])
				}
			}
		}
	}
}
