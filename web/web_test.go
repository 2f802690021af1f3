package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taoflow/taoflow/internal/progress"
	"github.com/taoflow/taoflow/state"
)

// hostile is text a job could print or a plan could hold: markup, a
// terminal escape, a C1 control, a path out of its directory.
const hostile = "<script>alert(1)</script>\x1b]0;pwned\x07 \u0085 ../../etc/passwd \"quoted\""

func fptr(v float64) *float64 { return &v }

// fixture writes a state with one running run of two cells into dir and
// returns the run's id.
func fixture(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	s, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const id = "sweep-1206-101010-abcd"
	now := time.Now()
	if err := s.CreateRun(ctx, state.Run{ID: id, Name: "sweep", PlanFile: "/p/sweep.yaml", State: state.RunRunning,
		Vars: map[string]string{"note": hostile}, StartedAt: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunRecord(ctx, state.RunRecord{RunID: id, Label: "first", Tags: map[string]string{"team": "vision", "x": hostile},
		Provenance: json.RawMessage(`{"git":{"repo":true,"commit":"0123456789abcdef","branch":"main","dirty":true}}`)}); err != nil {
		t.Fatal(err)
	}
	for i, lr := range []string{"0.1", "0.01"} {
		cell := "lr-" + lr
		run := "train[lr=" + lr + "]"
		wait := "wait[lr=" + lr + "]"
		st := "running"
		if i == 1 {
			st = "failed"
		}
		for _, n := range []state.Node{
			{RunID: id, ID: run, Step: "train", Instance: "a", Cell: cell, State: "succeeded", StartedAt: now.Add(-50 * time.Second), EndedAt: now.Add(-49 * time.Second)},
			{RunID: id, ID: wait, Step: "wait", Instance: "a", Cell: cell, State: st, StartedAt: now.Add(-49 * time.Second), Message: "job failed: " + hostile,
				Progress: "epoch 3/10 loss 0.25", ProgressFigures: &progress.Figures{Epoch: fptr(3), MaxEpoch: fptr(10), Metric: "loss", Value: fptr(0.25)}},
		} {
			if err := s.PutNode(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		for k, v := range map[string]string{"job": "tf-" + id + "-train." + cell, "matrix": `[{"key":"lr","value":"` + lr + `"},{"key":"batch","value":"32"}]`} {
			if err := s.SetNodeFact(ctx, id, run, k, v); err != nil {
				t.Fatal(err)
			}
		}
		var pts []state.Point
		for e := 1; e <= 5; e++ {
			for _, m := range []string{"loss", hostile} {
				pts = append(pts, state.Point{Cell: cell, Node: wait, Epoch: fptr(float64(e)), Time: now, Metric: m, Value: 1 / float64(e+i)})
			}
		}
		if err := s.AppendPoints(ctx, id, pts); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLog(id, wait, []byte("epoch 1/10 loss 0.5\n"+hostile+"\nepoch 3/10 loss 0.25\n")); err != nil {
			t.Fatal(err)
		}
		if err := s.FlushLog(id, wait); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

type served struct {
	srv    *httptest.Server
	h      *Handler
	dir    string
	run    string
	token  string
	port   int
	mu     sync.Mutex
	cancel []string
}

func serve(t *testing.T) *served {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".taoflow")
	s := &served{dir: dir, run: fixture(t, dir), token: NewToken()}
	s.h = New(Config{Dirs: func() []string { return []string{dir} }, Poll: 50 * time.Millisecond,
		Cancel: func(ctx context.Context, d, id string) (string, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.cancel = append(s.cancel, d+" "+id)
			return "interrupted", nil
		}})
	t.Cleanup(func() { s.h.Close() })
	// The guard needs the port before the server has one: a listener first.
	s.srv = httptest.NewUnstartedServer(nil)
	s.port = s.srv.Listener.Addr().(*net.TCPAddr).Port
	s.srv.Config.Handler = Guard(s.token, s.port, s.h)
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *served) url(path string) string { return s.srv.URL + path }

// client is a browser-like client: it keeps cookies and does not follow
// redirects.
func client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login visits the token URL and returns a client that holds the cookie.
func (s *served) login(t *testing.T) *http.Client {
	t.Helper()
	c := client()
	resp, _ := get(t, c, s.url("/?token="+s.token))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("token visit: %s, want 303", resp.Status)
	}
	return c
}

func TestGuardRefusesWithoutToken(t *testing.T) {
	s := serve(t)
	key := Key(s.dir)
	paths := []string{"/", "/assets/app.css", "/assets/app.js", "/events/runs", "/events/run/" + key + "/" + s.run,
		"/run/" + key + "/" + s.run, "/run/" + key + "/" + s.run + "/log/x", "/compare", "/nonexistent", "/?token=wrong", "/?token=",
		"/?token=" + s.token + "&token=" + s.token}
	c := client()
	for _, p := range paths {
		resp, body := get(t, c, s.url(p))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s, want 401", p, resp.Status)
		}
		if strings.Contains(body, s.run) {
			t.Errorf("GET %s without the token shows the run", p)
		}
		if resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: no Content-Security-Policy", p)
		}
	}
	// The cookie of another port, or a wrong one, is no token either.
	for _, ck := range []*http.Cookie{{Name: CookieName(s.port + 1), Value: s.token}, {Name: CookieName(s.port), Value: s.token + "x"}} {
		req, _ := http.NewRequest("GET", s.url("/"), nil)
		req.AddCookie(ck)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("cookie %s: %s, want 401", ck.Name, resp.Status)
		}
	}
	resp, err := http.Post(s.url("/run/"+key+"/"+s.run+"/cancel"), "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(s.cancel) != 0 {
		t.Errorf("POST cancel without the token: %s (cancels %v), want 401 and none", resp.Status, s.cancel)
	}
}

func TestGuardTokenThenCookie(t *testing.T) {
	s := serve(t)
	c := client()
	resp, _ := get(t, c, s.url("/compare?token="+s.token+"&run=a%2Fb"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("token visit: %s", resp.Status)
	}
	if loc := resp.Header.Get("Location"); loc != "/compare?run=a%2Fb" {
		t.Errorf("redirect to %q, want the same URL without the token", loc)
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == CookieName(s.port) {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value != s.token {
		t.Fatalf("cookie %+v, want %s, HttpOnly, SameSite=Strict", ck, CookieName(s.port))
	}
	if !strings.Contains(ck.Name, strconv.Itoa(s.port)) {
		t.Errorf("cookie name %q does not name the port", ck.Name)
	}
	for _, p := range []string{"/", "/assets/app.css", "/assets/app.js"} {
		if resp, _ := get(t, c, s.url(p)); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %s", p, resp.Status)
		}
	}
	// Another Host (DNS rebinding: a site whose name resolves to
	// 127.0.0.1) is refused, cookie or not.
	req, _ := http.NewRequest("GET", s.url("/"), nil)
	req.Host = "evil.example:" + strconv.Itoa(s.port)
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host evil.example: %s, want 403", resp.Status)
	}
}

// TestPagesEscapeAndHaveNoInlineScript: what the state holds (markup, a
// terminal escape) is shown as text; the served pages load only their own
// script and style and carry none inline.
func TestPagesEscapeAndHaveNoInlineScript(t *testing.T) {
	s := serve(t)
	c := s.login(t)
	key := Key(s.dir)
	runURL := "/run/" + key + "/" + s.run
	for _, p := range []string{"/", runURL, runURL + "/log/" + url.PathEscape("wait[lr=0.1]"), "/compare?run=" + key + "/" + s.run + "&run=" + key + "/" + s.run, "/?tags=team%3Dvision"} {
		resp, body := get(t, c, s.url(p))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", p, resp.Status, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		checkNoActiveContent(t, p, body, true)
		if strings.Contains(body, "\x1b") || strings.Contains(body, "\u0085") {
			t.Errorf("GET %s: a control character reached the page", p)
		}
	}
	_, body := get(t, c, s.url(runURL))
	for _, want := range []string{`&lt;script&gt;alert(1)&lt;/script&gt;\x1b]0;pwned\x07`, `<td class="epoch">3/10</td>`, "loss 0.25", "0123456789", "dirty", "team=vision", "first",
		"loss by epoch, colour by lr, dash by batch", `class="spark"`, "final loss over lr × batch", "nodes per instance and slot"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if _, body := get(t, c, s.url("/?tags=team%3Dnone")); strings.Contains(body, s.run) {
		t.Errorf("tag filter team=none still lists the run")
	}
}

// checkNoActiveContent fails when page holds a script other than the
// server's own file, an event-handler attribute, a style attribute or (in
// a report) any reference to another resource.
func checkNoActiveContent(t *testing.T, name, page string, served bool) {
	t.Helper()
	scripts := regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(page, -1)
	for _, sc := range scripts {
		if !served || sc != `<script src="/assets/app.js" defer>` {
			t.Errorf("%s: script tag %q", name, sc)
		}
	}
	if m := regexp.MustCompile(`(?i)\s(on[a-z]+|style)\s*=`).FindString(page); m != "" {
		t.Errorf("%s: attribute %q (inline script or style)", name, m)
	}
	if !served {
		if m := regexp.MustCompile(`(?i)(src|href|action)\s*=|url\(|@import`).FindString(page); m != "" {
			t.Errorf("%s: a reference to another resource: %q", name, m)
		}
	}
}

func TestCancelNeedsSameOrigin(t *testing.T) {
	s := serve(t)
	c := s.login(t)
	u := s.url("/run/" + Key(s.dir) + "/" + s.run + "/cancel")
	for name, hdr := range map[string]map[string]string{
		"no origin":       {},
		"cross-site":      {"Sec-Fetch-Site": "cross-site", "Origin": s.srv.URL},
		"other origin":    {"Origin": "http://evil.example"},
		"same-site other": {"Sec-Fetch-Site": "same-site"},
	} {
		req, _ := http.NewRequest("POST", u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", name, resp.Status)
		}
	}
	if len(s.cancel) != 0 {
		t.Fatalf("cancelled without a same-origin request: %v", s.cancel)
	}
	req, _ := http.NewRequest("POST", u, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", s.srv.URL)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(s.cancel) != 1 || s.cancel[0] != s.dir+" "+s.run {
		t.Fatalf("same-origin cancel: %s, cancels %v", resp.Status, s.cancel)
	}
	// The page after it says what the cancel did, once.
	_, body := get(t, c, s.url("/run/"+Key(s.dir)+"/"+s.run))
	if !strings.Contains(body, `<pre class="flash">interrupted</pre>`) {
		t.Errorf("run page after cancel lacks its message")
	}
}

// TestEventsSendChangedFragments: a change in the state reaches an open
// event stream as the fragment that changed.
func TestEventsSendChangedFragments(t *testing.T) {
	s := serve(t)
	c := s.login(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url("/events/run/"+Key(s.dir)+"/"+s.run), nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	st, err := state.Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Node(ctx, s.run, "wait[lr=0.1]")
	if err != nil {
		t.Fatal(err)
	}
	n.ProgressFigures.Epoch = fptr(7)
	if err := st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "fragment" {
			var f fragment
			if err := json.Unmarshal([]byte(d), &f); err != nil {
				t.Fatal(err)
			}
			if f.ID == "f-cells" && strings.Contains(f.HTML, `<td class="epoch">7/10</td>`) {
				return
			}
		}
	}
	t.Fatalf("no f-cells fragment with epoch 7/10 came: %v", sc.Err())
}

func TestReportStandsAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".taoflow")
	id := fixture(t, dir)
	s, err := state.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b bytes.Buffer
	if err := WriteReport(t.Context(), &b, s, dir, id, ReportConfig{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkNoActiveContent(t, "report", page, false)
	if n := strings.Count(page, "<svg"); n < 5 {
		t.Errorf("report has %d SVGs, want the two series charts, the heat map, the timeline and the sparklines", n)
	}
	for _, want := range []string{`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`, "<style>", id, `<td class="epoch">3/10</td>`, "taoflow logs " + id} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"a\x1b[2Jb":      `a\x1b[2Jb`,
		"tab\tnl\n":      `tab` + "\t" + `nl\x0a`,
		"c1\u0085":       `c1\u0085`,
		"bad\xffutf8":    `bad\xffutf8`,
		"del\x7f":        `del\x7f`,
		"ünïcode ok ▇▅▃": "ünïcode ok ▇▅▃",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CleanText("a\nb\x1b"); got != "a\nb\\x1b" {
		t.Errorf("CleanText kept %q", got)
	}
}
