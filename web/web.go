package web

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taoflow/taoflow/state"
)

//go:embed assets templates
var files embed.FS

// Config is what the handler serves.
type Config struct {
	// Dirs lists the state directories whose runs the UI shows; it is
	// called on each list of runs, so a state added to the index appears.
	Dirs func() []string
	// Cancel stops run id of the state in dir, as `taoflow cancel` does,
	// and says what it did. nil: the UI offers no cancel.
	Cancel func(ctx context.Context, dir, id string) (string, error)
	// Poll is how often a live page looks at the state for changes
	// (default 1s).
	Poll time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Handler serves the UI. It holds the state stores it opened read-only
// until Close.
type Handler struct {
	cfg Config
	mux *http.ServeMux

	mu     sync.Mutex
	stores map[string]*state.Store // by directory
	keys   map[string]string       // state directory by key
	flash  map[string]string       // a message for a run's next page, by key/id
}

var _ http.Handler = (*Handler)(nil)

// New returns the UI's handler (without access control: see Guard).
func New(cfg Config) *Handler {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dirs == nil {
		cfg.Dirs = func() []string { return nil }
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), stores: map[string]*state.Store{}, keys: map[string]string{}, flash: map[string]string{}}
	h.mux.HandleFunc("GET /{$}", h.runs)
	h.mux.HandleFunc("GET /run/{key}/{id}", h.run)
	h.mux.HandleFunc("GET /run/{key}/{id}/log/{node}", h.log)
	h.mux.HandleFunc("POST /run/{key}/{id}/cancel", h.cancel)
	h.mux.HandleFunc("GET /compare", h.compare)
	h.mux.HandleFunc("GET /events/runs", h.runsEvents)
	h.mux.HandleFunc("GET /events/run/{key}/{id}", h.runEvents)
	h.mux.HandleFunc("GET /events/log/{key}/{id}/{node}", h.logEvents)
	assets, _ := fs.Sub(files, "assets")
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	return h
}

// CSP is the Content-Security-Policy of every served page: the server's
// own scripts, styles and images, and nothing else.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP serves r with the UI's security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w)
	h.mux.ServeHTTP(w, r)
}

func secure(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
}

// Close closes the stores the handler opened.
func (h *Handler) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for d, s := range h.stores {
		errs = append(errs, s.Close())
		delete(h.stores, d)
	}
	return errors.Join(errs...)
}

// Key is the short name of state directory dir in the UI's URLs.
func Key(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:5])
}

// dirs are the state directories, absolute, each once; they are
// remembered by key.
func (h *Handler) dirs() []string {
	var out []string
	for _, d := range h.cfg.Dirs() {
		if abs, err := filepath.Abs(d); err == nil && !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	h.mu.Lock()
	for _, d := range out {
		h.keys[Key(d)] = d
	}
	h.mu.Unlock()
	return out
}

// store opens (once) the state in dir for reading; nil and no error when
// there is no state there.
func (h *Handler) store(dir string) (*state.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.stores[dir]; ok {
		return s, nil
	}
	s, err := state.OpenReadOnly(dir)
	if errors.Is(err, state.ErrNoState) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.stores[dir] = s
	return s, nil
}

// storeOf finds the state of the request's {key}.
func (h *Handler) storeOf(r *http.Request) (*state.Store, string, error) {
	key := r.PathValue("key")
	h.mu.Lock()
	dir, ok := h.keys[key]
	h.mu.Unlock()
	if !ok {
		h.dirs()
		h.mu.Lock()
		dir, ok = h.keys[key]
		h.mu.Unlock()
	}
	if !ok {
		return nil, "", errNotFound
	}
	s, err := h.store(dir)
	if err == nil && s == nil {
		err = errNotFound
	}
	return s, dir, err
}

var errNotFound = errors.New("not found")

func (h *Handler) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, errNotFound) || errors.Is(err, state.ErrNotFound) {
		code = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, Clean(err.Error()))
}

// view is what the page templates get.
type view struct {
	Title  string
	Report bool
	CSS    template.CSS // inline in a report
	Events string       // the page's event stream, "" for none
	Data   any
}

func (h *Handler) render(w http.ResponseWriter, name string, v view) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, v); err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// RunsPage is the list of runs.
type RunsPage struct {
	Rows     []RunsRow
	Tag      string // the filter as typed
	Problems []string
	ManyDirs bool
}

func (h *Handler) loadRuns(ctx context.Context, q url.Values) RunsPage {
	tags := parseTags(q)
	p := RunsPage{Tag: strings.Join(q["tag"], " ")}
	dirs := h.dirs()
	p.ManyDirs = len(dirs) > 1
	for _, d := range dirs {
		s, err := h.store(d)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", d, err))
			continue
		}
		if s == nil {
			continue
		}
		rows, err := listRuns(ctx, s, Key(d), d, tags, h.cfg.Now())
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", d, err))
		}
		p.Rows = append(p.Rows, rows...)
	}
	slices.SortStableFunc(p.Rows, func(a, b RunsRow) int { return b.Run.StartedAt.Compare(a.Run.StartedAt) })
	return p
}

func (h *Handler) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if tag := strings.TrimSpace(q.Get("tags")); tag != "" {
		// The filter form's one field: KEY=VALUE words.
		q.Del("tags")
		for _, t := range strings.Fields(tag) {
			q.Add("tag", t)
		}
	}
	p := h.loadRuns(r.Context(), q)
	h.render(w, "runs", view{Title: "taoflow runs", Events: "/events/runs?" + q.Encode(), Data: p})
}

func (h *Handler) loadRun(ctx context.Context, s *state.Store, dir, id string, c Choice) (*RunPage, error) {
	return loadRun(ctx, s, Key(dir), dir, id, c, false, h.cfg.Now())
}

func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	s, dir, err := h.storeOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id := r.PathValue("id")
	choice := choiceOf(r.URL.Query())
	p, err := h.loadRun(r.Context(), s, dir, id, choice)
	if err != nil {
		h.fail(w, err)
		return
	}
	h.mu.Lock()
	p.Message = h.flash[p.Key+"/"+id]
	delete(h.flash, p.Key+"/"+id)
	h.mu.Unlock()
	ev := "/events/run/" + p.Key + "/" + url.PathEscape(id)
	if q := choice.Query(); q != "" {
		ev += "?" + q
	}
	h.render(w, "run", view{Title: "taoflow " + id, Events: ev, Data: p})
}

// cancel stops a run, after checking that the request came from the UI's
// own page (the cookie is SameSite=Strict too).
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "taoflow ui: cancel refused: the request did not come from the UI's own page", http.StatusForbidden)
		return
	}
	if h.cfg.Cancel == nil {
		http.Error(w, "taoflow ui: cancel is not offered here", http.StatusForbidden)
		return
	}
	s, dir, err := h.storeOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id := r.PathValue("id")
	if _, err := s.Run(r.Context(), id); err != nil {
		h.fail(w, err)
		return
	}
	msg, err := h.cfg.Cancel(r.Context(), dir, id)
	if err != nil {
		msg = strings.TrimSpace(msg + "\ncancel failed: " + err.Error())
	}
	key := Key(dir)
	h.mu.Lock()
	h.flash[key+"/"+id] = msg
	h.mu.Unlock()
	http.Redirect(w, r, "/run/"+key+"/"+url.PathEscape(id), http.StatusSeeOther)
}

// sameOrigin says whether r came from a page of this server: the
// browser's Sec-Fetch-Site, else an Origin naming this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	o := r.Header.Get("Origin")
	return o != "" && o == "http://"+r.Host
}

// LogPage is a node's log.
type LogPage struct {
	Key, Dir, Run, Node, State string
	Text                       string
	Cut                        bool // the log's start is not shown
	Size                       int64
}

// LogWindow is how much of a log's end the log page shows at first.
const LogWindow = 256 << 10

func (h *Handler) log(w http.ResponseWriter, r *http.Request) {
	s, dir, err := h.storeOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id, node := r.PathValue("id"), r.PathValue("node")
	n, err := s.Node(r.Context(), id, node)
	if err != nil {
		h.fail(w, err)
		return
	}
	p := LogPage{Key: Key(dir), Dir: dir, Run: id, Node: node, State: n.State}
	text, size, cut := readLog(s, id, node, -1)
	p.Text, p.Size, p.Cut = text, size, cut
	ev := "/events/log/" + p.Key + "/" + url.PathEscape(id) + "/" + url.PathEscape(node) + "?from=" + strconv.FormatInt(size, 10)
	h.render(w, "log", view{Title: "log of " + node, Events: ev, Data: p})
}

// readLog reads node's log from offset from (-1: its last LogWindow
// bytes, from a line's start) up to the end of its last whole line; it
// returns the text, cleaned, and the offset after it.
func readLog(s *state.Store, run, node string, from int64) (string, int64, bool) {
	rc, err := s.OpenLog(run, node)
	if err != nil {
		return "", max(from, 0), false
	}
	defer rc.Close()
	f, ok := rc.(*os.File)
	if !ok {
		return "", max(from, 0), false
	}
	fi, err := f.Stat()
	if err != nil {
		return "", max(from, 0), false
	}
	cut := false
	if from < 0 {
		from = 0
		if fi.Size() > LogWindow {
			from, cut = fi.Size()-LogWindow, true
		}
	}
	if from >= fi.Size() {
		return "", from, false
	}
	n := min(fi.Size()-from, 4<<20)
	b := make([]byte, n)
	got, _ := f.ReadAt(b, from)
	b = b[:got]
	start := 0
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			start = i + 1
		}
	}
	end := len(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= start && int64(got) < 64<<10 {
		end = i + 1 // whole lines only, unless a line is that long
	} else if i >= start {
		end = i + 1
	}
	return CleanText(string(b[start:end])), from + int64(end), cut
}

// ComparePage compares runs side by side.
type ComparePage struct {
	Runs   []*RunPage
	Rows   []CompareRow
	Metric string  // the metric of the charts
	Charts []Chart // the runs' curves overlaid
}

// CompareRow is one setting of the compared runs.
type CompareRow struct {
	Name   string
	Values []string
	Differ bool
}

func (h *Handler) compare(w http.ResponseWriter, r *http.Request) {
	var p ComparePage
	h.dirs()
	for _, ref := range r.URL.Query()["run"] {
		key, id, ok := strings.Cut(ref, "/")
		if !ok {
			continue
		}
		h.mu.Lock()
		dir, ok := h.keys[key]
		h.mu.Unlock()
		if !ok {
			h.fail(w, fmt.Errorf("compare: no state %q: %w", key, errNotFound))
			return
		}
		s, err := h.store(dir)
		if err == nil && s == nil {
			err = errNotFound
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		rp, err := h.loadRun(r.Context(), s, dir, id, Choice{})
		if err != nil {
			h.fail(w, err)
			return
		}
		p.Runs = append(p.Runs, rp)
	}
	p.Rows = compareRows(p.Runs)
	p.Metric, p.Charts = compareCharts(p.Runs, r.URL.Query().Get("metric"))
	h.render(w, "compare", view{Title: "compare runs", Data: p})
}

// compareRows lays out the settings and outcomes of runs side by side.
func compareRows(runs []*RunPage) []CompareRow {
	var rows []CompareRow
	add := func(name string, f func(*RunPage) string) {
		row := CompareRow{Name: name}
		for _, p := range runs {
			row.Values = append(row.Values, f(p))
		}
		for _, v := range row.Values {
			if v != row.Values[0] {
				row.Differ = true
			}
		}
		rows = append(rows, row)
	}
	add("plan", func(p *RunPage) string { return p.Run.Name })
	add("plan file", func(p *RunPage) string { return p.Run.PlanFile })
	add("plan sha256", func(p *RunPage) string { return short(p.Run.PlanHash, 12) })
	add("name", func(p *RunPage) string { return p.Record.Label })
	add("state", func(p *RunPage) string { return p.Run.State })
	add("duration", func(p *RunPage) string { return p.Duration })
	add("git", func(p *RunPage) string { return gitText(p.Git) })
	keys := map[string]bool{}
	for _, p := range runs {
		for k := range p.Run.Vars {
			keys["var "+k] = true
		}
		for k := range p.Record.Tags {
			keys["tag "+k] = true
		}
	}
	for _, k := range slices.Sorted(mapsKeys(keys)) {
		add(k, func(p *RunPage) string {
			if name, ok := strings.CutPrefix(k, "var "); ok {
				return p.Run.Vars[name]
			}
			return p.Record.Tags[strings.TrimPrefix(k, "tag ")]
		})
	}
	add("matrix", func(p *RunPage) string {
		var parts []string
		for i, k := range p.Keys {
			var vals []string
			for _, c := range p.Cells {
				if i < len(c.Values) && !slices.Contains(vals, c.Values[i]) {
					vals = append(vals, c.Values[i])
				}
			}
			parts = append(parts, k+": "+strings.Join(vals, ", "))
		}
		return strings.Join(parts, "; ")
	})
	add("cells", func(p *RunPage) string { return strconv.Itoa(len(p.Cells)) })
	metrics := map[string]bool{}
	for _, p := range runs {
		for _, m := range p.Results.Metrics {
			metrics[m] = true
		}
	}
	for _, m := range slices.Sorted(mapsKeys(metrics)) {
		add("best "+m, func(p *RunPage) string {
			t := p.Results
			t.Rows = slices.Clone(t.Rows) // Sort sorts in place
			if t.Sort(m) != nil || len(t.Rows) == 0 {
				return ""
			}
			v, ok := t.Rows[0].Best[m]
			if !ok {
				return ""
			}
			return num(v) + " (" + cmp.Or(t.Rows[0].Cell, t.Rows[0].Instance) + ")"
		})
	}
	return rows
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func gitText(g Git) string {
	if !g.Repo && g.Commit == "" {
		return ""
	}
	s := short(g.Commit, 10)
	if g.Branch != "" {
		s += " (" + g.Branch + ")"
	}
	if g.Dirty {
		s += " dirty"
	}
	return s
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// sse starts an event stream on w; nil when w cannot stream.
func sse(w http.ResponseWriter) http.Flusher {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "retry: 2000\n\n")
	f.Flush()
	return f
}

func sendEvent(w io.Writer, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	return err
}

// fragment is one part of a page the stream replaces.
type fragment struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// stream sends the fragments of render that changed since it last
// sent them, until the client goes. It renders again when the state in
// dirs changed (its files' sizes and times: every commit changes the
// write-ahead log) and at least every ClockRefresh (times shown grow), and
// never sooner than Poll or twice the last render's time after the last:
// a large run costs the server at most about a third of a core per page.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, dirs []string, render func() (map[string]string, error)) {
	f := sse(w)
	if f == nil {
		return
	}
	last := map[string]string{}
	first := true
	seen := fingerprint(dirs)
	rendered := time.Now()
	keepAlive := time.Now()
	wait := h.cfg.Poll
	for {
		if !first {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(wait):
			}
			now := time.Now()
			if fp := fingerprint(dirs); fp == seen && now.Sub(rendered) < ClockRefresh {
				if now.Sub(keepAlive) > 15*time.Second {
					if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
						return
					}
					f.Flush()
					keepAlive = now
				}
				wait = h.cfg.Poll
				continue
			} else {
				seen = fp
			}
		}
		t0 := time.Now()
		frags, err := render()
		rendered = time.Now()
		wait = max(h.cfg.Poll, 2*rendered.Sub(t0))
		if err != nil {
			if sendEvent(w, "problem", Clean(err.Error())) != nil {
				return
			}
			f.Flush()
			first = false
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(frags)) {
			html := frags[id]
			if !first && last[id] == html {
				continue
			}
			last[id] = html
			if first {
				continue // the page has them already
			}
			if err := sendEvent(w, "fragment", fragment{ID: id, HTML: html}); err != nil {
				return
			}
		}
		first = false
		keepAlive = time.Now()
		f.Flush()
	}
}

// ClockRefresh is how often a live page is rendered again although the
// state did not change: the times it shows grow.
const ClockRefresh = 5 * time.Second

// fingerprint is the size and modification time of every file of the
// states in dirs that a commit changes.
func fingerprint(dirs []string) string {
	var b strings.Builder
	for _, d := range dirs {
		for _, name := range []string{"state.db", "state.db-wal"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err == nil {
				fmt.Fprintf(&b, "%s:%d:%d;", name, fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return b.String()
}

// runFragments are the parts of the run page a stream replaces.
var runFragments = []string{"f-summary", "f-cells", "f-charts", "f-graph", "f-instances", "f-failures", "f-results"}

func renderFragments(names []string, v view) (map[string]string, error) {
	out := map[string]string{}
	var b bytes.Buffer
	for _, n := range names {
		b.Reset()
		if err := pages.ExecuteTemplate(&b, n, v); err != nil {
			return nil, err
		}
		out[n] = b.String()
	}
	return out, nil
}

func (h *Handler) runEvents(w http.ResponseWriter, r *http.Request) {
	s, dir, err := h.storeOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id, choice := r.PathValue("id"), choiceOf(r.URL.Query())
	h.stream(w, r, []string{dir}, func() (map[string]string, error) {
		p, err := h.loadRun(r.Context(), s, dir, id, choice)
		if err != nil {
			return nil, err
		}
		return renderFragments(runFragments, view{Data: p})
	})
}

func (h *Handler) runsEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	h.stream(w, r, h.dirs(), func() (map[string]string, error) {
		return renderFragments([]string{"f-runs"}, view{Data: h.loadRuns(r.Context(), q)})
	})
}

// logEvents follows a node's log from ?from=OFFSET: each new piece of
// whole lines is a "log" event.
func (h *Handler) logEvents(w http.ResponseWriter, r *http.Request) {
	s, _, err := h.storeOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id, node := r.PathValue("id"), r.PathValue("node")
	from, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	if err != nil || from < 0 {
		from = 0
	}
	f := sse(w)
	if f == nil {
		return
	}
	tick := time.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	lastState := ""
	for {
		text, next, _ := readLog(s, id, node, from)
		if text != "" {
			if sendEvent(w, "log", text) != nil {
				return
			}
		}
		from = next
		if n, err := s.Node(r.Context(), id, node); err == nil && n.State != lastState {
			lastState = n.State
			if sendEvent(w, "state", n.State) != nil {
				return
			}
		}
		f.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
