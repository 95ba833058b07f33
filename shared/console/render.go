package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFiles, "static")
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// pages are the page templates by name, each the layout plus its file.
type pages map[string]*template.Template

var pageNames = []string{"orders", "order", "confirm", "dlq", "alerts", "agents", "faults", "health", "bulk", "error"}

var funcs = template.FuncMap{
	"clock": clock,
	"when":  func(t time.Time) string { return operator.Clock(t, time.Now()) },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ended":   func(s workflow.State) bool { return s.Ended() },
	"short":   short,
	"lower":   strings.ToLower,
	"add":     func(a, b int) int { return a + b },
	"percent": percent,
	"windows": windows,
}

func parsePages() (pages, error) {
	base, err := template.New("layout").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	p := pages{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFiles, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		p[name] = t
	}
	return p, nil
}

// view is what every page gets: the layout's fields and the page's Data.
type view struct {
	Title   string
	Nav     string // the menu entry to highlight
	Token   string // the process's token, for the page's forms
	Faults  bool   // the faults page exists
	Flash   string // the result of the action just taken
	Refresh int    // live refresh period, ms
	Data    any
}

// render writes the page (or with ?partial=1 only its "live" block, for the
// live refresh) with the status code.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.Token, v.Faults, v.Refresh = s.token, s.cfg.Faults != nil, int(s.cfg.Refresh.Milliseconds())
	if id := r.URL.Query().Get("flash"); id != "" {
		v.Flash = s.flash.get(id)
	}
	tmpl := "layout"
	if r.URL.Query().Get("partial") == "1" && s.pages[name].Lookup("live") != nil {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, tmpl, v); err != nil {
		slog.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// problem is an error page's content.
type problem struct {
	Status  int
	Heading string
	Detail  string
}

// fail writes an error page: what went wrong, in words.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, heading, detail string) {
	s.render(w, r, status, "error", view{Title: heading, Data: problem{Status: status, Heading: heading, Detail: detail}})
}

// failErr writes a 502 page for an error from the deployment.
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.fail(w, r, http.StatusBadGateway, "The deployment did not answer", what+": "+err.Error())
}

// flashes hold the results of recent actions, shown once by the page an
// action redirects to (POST, then redirect, then GET: a reload repeats
// nothing).
type flashes struct {
	mu    sync.Mutex
	m     map[string]string
	order []string
}

func (f *flashes) put(text string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = text
	f.order = append(f.order, id)
	if len(f.order) > 100 {
		delete(f.m, f.order[0])
		f.order = f.order[1:]
	}
	return id
}

func (f *flashes) get(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[id]
}

// redirect sends the browser on to path with the action's result to show.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, path, result string) {
	http.Redirect(w, r, path+"?flash="+s.flash.put(result), http.StatusSeeOther)
}
