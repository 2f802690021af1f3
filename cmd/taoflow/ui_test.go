package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/taoflow/taoflow/internal/testrig"
	"github.com/taoflow/taoflow/state"
)

// uiPlan is a sweep of four cells whose jobs print an epoch line every
// 0.417 s (plain output lines, which become the cells' series) until they
// are cancelled.
const uiPlan = `taoflow: 1
name: uisweep
instances:
  a: {slots: 4}
steps:
  - id: train
    uses: run
    matrix: {lr: [0.1, 0.01], k: [2, 3]}
    with:
      command: |
        k=${{ matrix.k }}
        case $k in ''|*[!0-9]*) exit 2;; esac
        for e in $(seq 1 100000); do
          awk -v e="$e" -v k="$k" -v lr=${{ matrix.lr }} 'BEGIN { printf "epoch %d/100000 loss %.4f acc %.4f\n", e, 1 / (1 + e * k * (1 + 40 * lr) / 40), 1 - 1 / (1 + e / 10) }'
          sleep 0.417
        done
  - id: wait
    uses: wait
    needs: [train]
    matrix: inherit
    with: {interval: 100ms}
finally:
  - id: teardown
    uses: delete
`

// chromium finds the browser the UI test drives, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium to drive: apt-get install chromium (make deps)")
	return ""
}

// taoflowBin is this test binary under the name taoflow (TestMain then
// runs the CLI).
func taoflowBin(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "taoflow")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startUI starts `taoflow ui` in dir and returns the URL it printed first.
func startUI(t *testing.T, bin, dir string, env []string) string {
	t.Helper()
	ui := exec.Command(bin, "ui", "--addr", "127.0.0.1:0", "--poll", "200ms")
	ui.Dir, ui.Env = dir, env
	out, err := ui.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	ui.Stderr = &stderr
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ui.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- ui.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("taoflow ui after Ctrl-C: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = ui.Process.Kill()
			if err := <-done; err != nil {
				t.Logf("taoflow ui, killed: %v", err)
			}
			t.Errorf("taoflow ui did not stop within 10s of Ctrl-C")
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("taoflow ui printed no URL: %v\n%s", err, stderr.String())
	}
	u := strings.TrimSpace(line)
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.Contains(u, "/?token=") {
		t.Fatalf("taoflow ui's first line %q is not its URL with a token", u)
	}
	return u
}

// TestUIBrowser drives `taoflow ui` with headless Chromium through a run:
// the list of runs, the run page following a cell's epoch without a
// reload, a node's log growing, the cancel button (the apply ends with
// 130 and leaves nothing), then the report opened from a file with no
// request leaving it. UPDATE_SCREENSHOTS=1 writes docs/img/ui-run.png
// and docs/img/report.png.
func TestUIBrowser(t *testing.T) {
	chrome := chromium(t)
	bin := taoflowBin(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sweep.yaml"), []byte(uiPlan), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())

	apply := exec.Command(bin, "apply", "--output", "plain", "--tag", "team=vision", "sweep.yaml")
	apply.Dir, apply.Env = dir, env
	var applyOut lockedBuffer
	apply.Stdout, apply.Stderr = &applyOut, &applyOut
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	// applied closes when apply has exited, with its status in applyCode.
	applied := make(chan struct{})
	applyCode := -1
	go func() {
		_ = apply.Wait()
		applyCode = apply.ProcessState.ExitCode()
		close(applied)
	}()
	t.Cleanup(func() {
		select {
		case <-applied:
		default:
			_ = apply.Process.Signal(syscall.SIGINT)
			select {
			case <-applied:
			case <-time.After(30 * time.Second):
				_ = apply.Process.Kill()
				<-applied
			}
		}
	})

	if !testrig.Within(60*time.Second, func() bool { return len(processesWith("sleep 0.417")) > 0 }) {
		t.Fatalf("the jobs' processes do not run\n%s", tail(applyOut.String(), 3000))
	}
	base := startUI(t, bin, dir, env)
	origin := base[:strings.Index(base, "/?token=")]
	// Without the token: 401, the assets and the event stream too.
	for _, p := range []string{"/", "/assets/app.js", "/assets/app.css", "/events/runs", "/compare"} {
		resp, err := http.Get(origin + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s, want 401", p, resp.Status)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancelTime := context.WithTimeout(ctx, 240*time.Second)
	defer cancelTime()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\napply's output:\n%s", what, err, tail(applyOut.String(), 3000))
		}
	}
	// text reads an element's text in one evaluation: a fragment the
	// stream replaces between a query and a read would lose its node.
	text := func(c context.Context, sel string) string {
		t.Helper()
		q, _ := json.Marshal(sel)
		v, err := chromedp.Run(c, chromedp.Evaluate[string](`(function(){var e=document.querySelector(`+string(q)+`);return e?e.innerText:"";})()`))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return v
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return fmt.Sprint(v)
	}
	location := func() string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	do("start the browser")
	// The cancel button asks first: say yes.
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}); err != nil {
		t.Fatal(err)
	}

	// The list of runs shows the run (live: it may start after the page).
	do("open the URL with the token", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`table.runs a.runlink`)))
	if loc := location(); loc != origin+"/" {
		t.Errorf("after the first visit the address is %q, want %q (the token removed)", loc, origin+"/")
	}
	runID := text(ctx, `table.runs a.runlink`)
	if !strings.HasPrefix(runID, "uisweep-") {
		t.Fatalf("runs list shows %q, want the uisweep run", runID)
	}
	if row := text(ctx, `table.runs tbody tr`); !strings.Contains(row, "team=vision") || !strings.Contains(row, "running") {
		t.Errorf("the run's row %q lacks its tag or state", row)
	}

	// The run page: a cell's epoch advances without a reload.
	do("open the run", chromedp.Click(chromedp.CSS(`table.runs a.runlink`)), chromedp.WaitVisible(chromedp.CSS(`#f-cells td.epoch`)))
	runURL := location()
	eval(`window.__taoflowTest = 42`)
	epochOf := func() int {
		s := text(ctx, `#f-cells tbody tr td.epoch`)
		n, _ := strconv.Atoi(strings.SplitN(strings.TrimSpace(s), "/", 2)[0])
		return n
	}
	var first, later int
	testrig.Eventually(t, 60*time.Second, "a cell's epoch to show", func() bool { first = epochOf(); return first > 0 })
	testrig.Eventually(t, 30*time.Second, "the cell's epoch to advance", func() bool { later = epochOf(); return later > first })
	// The chart's curves gain points: its first line's path has more.
	pointsOf := func() int {
		n, _ := strconv.Atoi(eval(`(function(){var p=document.querySelector("#f-charts path.line");return p?String(p.getAttribute("d").split(/[ML]/).length-1):"0";})()`))
		return n
	}
	var p1, p2 int
	testrig.Eventually(t, 30*time.Second, "a chart with a curve", func() bool { p1 = pointsOf(); return p1 > 1 })
	testrig.Eventually(t, 30*time.Second, "the curve to gain points", func() bool { p2 = pointsOf(); return p2 > p1 })
	if m := eval(`window.__taoflowTest`); m != "42" {
		t.Errorf("the page was reloaded (its script state is gone) while the epoch went %d → %d", first, later)
	}
	if n, _ := strconv.Atoi(eval(`document.body.getAttribute("data-updates") || "0"`)); n == 0 {
		t.Errorf("the epoch went %d → %d, but no fragment came over the event stream", first, later)
	}
	screenshot(t, ctx, "ui-run.png")
	// On a phone's screen the page does not scroll sideways: wide tables
	// scroll inside their own box.
	do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if w := eval(`document.documentElement.scrollWidth <= window.innerWidth`); w != "true" {
		t.Errorf("on a 390 px screen the run page is %s px wide", eval(`document.documentElement.scrollWidth`))
	}
	do("back to a desktop screen", chromedp.EmulateViewport(1280, 900))

	// A node's log, followed.
	do("open a node's log", chromedp.Click(chromedp.CSS(`#f-cells tbody tr a`)), chromedp.WaitVisible(chromedp.ID(`log`)))
	logLen1 := len(eval(`document.getElementById("log").textContent`))
	testrig.Eventually(t, 30*time.Second, "the log to grow", func() bool {
		s := eval(`document.getElementById("log").textContent`)
		return len(s) > logLen1 && strings.Contains(s, "epoch ")
	})

	// Cancel from the page: the apply is interrupted and tears down.
	do("cancel the run", chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.ID(`cancel`)), chromedp.Click(chromedp.ID(`cancel`)))
	select {
	case <-applied:
		if applyCode != 130 {
			t.Fatalf("apply after the UI's cancel: exit %d, want 130\n%s", applyCode, tail(applyOut.String(), 3000))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("apply still runs 60s after the UI's cancel\n%s", tail(applyOut.String(), 3000))
	}
	if !testrig.Within(10*time.Second, func() bool { return len(processesWith("sleep 0.417")) == 0 }) {
		t.Errorf("job processes left after the cancel: %v", processesWith("sleep 0.417"))
	}
	st, err := state.OpenReadOnly(filepath.Join(dir, ".taoflow"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Run(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	alive, err := st.Alive(t.Context(), runID)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.State != state.RunInterrupted || len(alive) > 0 {
		t.Errorf("after the cancel: run %s, %d resources may exist; want interrupted, none", r.State, len(alive))
	}
	do("the page says what the cancel did", chromedp.WaitVisible(chromedp.CSS(`.flash`)))
	if flash := text(ctx, `.flash`); !strings.Contains(flash, "interrupted its apply") {
		t.Errorf("after the cancel the page says %q", flash)
	}

	// The report opens from a file and asks nothing of any server.
	report := filepath.Join(dir, "report.html")
	rep := exec.Command(bin, "report", runID, "-o", report, "--state", filepath.Join(dir, ".taoflow"))
	rep.Env = env
	if out, err := rep.CombinedOutput(); err != nil {
		t.Fatalf("taoflow report: %v\n%s", err, out)
	}
	rctx, cancelR := chromedp.NewContext(ctx)
	defer cancelR()
	var mu sync.Mutex
	var requested []string
	if err := chromedp.Do(rctx); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(rctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requested = append(requested, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(rctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(rctx, chromedp.Navigate("file://"+report), chromedp.WaitVisible(chromedp.ID(`f-cells`))); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	if h1, cells := text(rctx, `h1`), text(rctx, `#f-cells`); h1 != runID || !strings.Contains(cells, "lr") || !strings.Contains(cells, "0.01") {
		t.Errorf("the report shows %q and cells %q", h1, cells)
	}
	screenshot(t, rctx, "report.png")
	mu.Lock()
	defer mu.Unlock()
	if len(requested) == 0 {
		t.Fatal("no request seen at all: the network events are not observed")
	}
	for _, u := range requested {
		if !strings.HasPrefix(u, "file:") {
			t.Errorf("the report requested %s", u)
		}
	}
}

// screenshot writes the page in ctx to docs/img/NAME when
// UPDATE_SCREENSHOTS is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "..", "docs", "img", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestUIRefusesOtherAddresses: ui listens on loopback only.
func TestUIRefusesOtherAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8765", ":8765", "192.0.2.1:0", "example.com:80", "nonsense"} {
		var out, errb strings.Builder
		err := run(t.Context(), []string{"ui", "--addr", addr, "--state", t.TempDir()}, stdio{in: strings.NewReader(""), out: &out, err: &errb})
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("ui --addr %s: %v, want exit 2", addr, err)
			continue
		}
		if msg := fmt.Sprint(err); !strings.Contains(msg, addr) || out.Len() > 0 {
			t.Errorf("ui --addr %s: %q (stdout %q): want the address named and no URL", addr, msg, out.String())
		}
	}
}

// lockedBuffer is a buffer a child writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
