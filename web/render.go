package web

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taoflow/taoflow/state"
)

var funcs = template.FuncMap{
	"clean":   Clean,
	"pathesc": url.PathEscape,
	"short":   short,
	"gittext": gitText,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"tags": func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	},
	"vars": func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	},
	"num":   num,
	"deref": func(p *float64) float64 { return *p },
	"secs":  func(s float64) string { return elapsed(time.Duration(s * float64(time.Second))) },
	"metric": func(m map[string]float64, k string) string {
		if v, ok := m[k]; ok {
			return num(v)
		}
		return ""
	},
	"localpath": func(u string) string {
		if p, ok := strings.CutPrefix(u, "file://"); ok {
			return p
		}
		if strings.HasPrefix(u, "/") {
			return u // a fetch's local directory
		}
		return ""
	},
	"svg": func(s string) template.HTML { return template.HTML(s) }, // drawn by web/chart, every value escaped there
}

var pages = template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html"))

// Clean shows the control characters of s as escapes (\x1b, \u0085), as
// the CLI's human output does, so that a line of job output cannot hide
// or rewrite text on the page either; newlines too.
func Clean(s string) string { return clean(s, false) }

// CleanText is Clean keeping newlines and tabs.
func CleanText(s string) string { return clean(s, true) }

func clean(s string, keepNewline bool) string {
	needs := func(r rune) bool {
		return (r < 0x20 && r != '\t' && (r != '\n' || !keepNewline)) || r == 0x7f || (r >= 0x80 && r <= 0x9f)
	}
	ok := utf8.ValidString(s)
	if ok {
		for _, r := range s {
			if needs(r) {
				ok = false
				break
			}
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needs(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case needs(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// ReportConfig says how WriteReport draws a run.
type ReportConfig struct {
	Now func() time.Time
}

// WriteReport writes run id of the state in dir (store) as one
// self-contained HTML page: its CSS inline, its charts inline SVG, no
// script, and no reference to anything outside the file (its own
// Content-Security-Policy forbids loading any).
func WriteReport(ctx context.Context, w io.Writer, store *state.Store, dir, id string, cfg ReportConfig) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p, err := loadRun(ctx, store, Key(dir), dir, id, Choice{}, true, cfg.Now())
	if err != nil {
		return err
	}
	css, err := files.ReadFile("assets/app.css")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, "run", view{Title: "taoflow run " + id, Report: true, CSS: template.CSS(css), Data: p}); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}
