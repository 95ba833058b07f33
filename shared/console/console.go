// Package console is the web console: server-rendered pages (net/http,
// html/template, assets embedded with embed: nothing is fetched from the
// internet) over the same operator code sasctl runs. It shows the orders by
// state, an order's workflow as a graph with its timeline, the dead-letter
// queues and the alerts, and resubmits, cancels and redrives, one order at
// a time or every order a search finds (a dry run first, then its
// confirmation: bulk.go).
//
// It listens on 127.0.0.1 only, and answers only requests addressed to that
// address (a page of another site that rebinds its name to 127.0.0.1 gets
// nothing). Every action that changes state is a POST that must carry the
// process's random token, which only the console's own pages embed, and come
// from the console's own origin (Origin, or else Referer).
package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sas-go/sas/shared/operator"
)

// FaultControl shows and changes the faults of a running remote-service
// simulator (sasctl dev's; *remotesim.Simulator is one). It speaks in
// standard types only: the console is part of the product and imports none
// of the local tooling.
type FaultControl interface {
	// DescribeAll says in words the faults in effect, by service ("" for
	// every service without faults of its own).
	DescribeAll(now time.Time) map[string]string
	// ApplyForm applies the faults form's fields (service, clear,
	// transient, permanent, latency, outage-service, outage-for); an empty
	// field changes nothing, a bad value is an error that says why.
	ApplyForm(form url.Values, now time.Time) error
}

// Config is what the console serves.
type Config struct {
	Operator *operator.Operator
	// Faults, if set, gives the console a faults page (`sasctl dev`).
	Faults FaultControl
	// Who is recorded as who cancelled an order (default "console").
	Who string
	// Refresh is how often a live list or an order in flight is reloaded
	// (default 2s).
	Refresh time.Duration
	// CensusEvery is how old the counts by state may get before a page
	// scans the table again (default 30s).
	CensusEvery time.Duration
	// PageSize is the orders listed per page (default 25).
	PageSize int
	// BulkMax is the most orders one bulk action from the orders page acts
	// on (default 500: 25 s at operator.BulkRate, one request); a dry run
	// that would act on more is shown, not offered to confirm (sasctl acts
	// on any number, and can be stopped and resumed).
	BulkMax int
}

func (c Config) withDefaults() (Config, error) {
	if c.Operator == nil {
		return c, errors.New("console: no operator")
	}
	if c.Who == "" {
		c.Who = "console"
	}
	if c.Refresh <= 0 {
		c.Refresh = 2 * time.Second
	}
	if c.CensusEvery <= 0 {
		c.CensusEvery = 30 * time.Second
	}
	if c.PageSize <= 0 {
		c.PageSize = 25
	}
	if c.BulkMax <= 0 {
		c.BulkMax = 500
	}
	return c, nil
}

// Server is a console for one deployment.
type Server struct {
	cfg    Config
	op     *operator.Operator
	token  string
	pages  pages
	census censusCache
	flash  flashes
	plans  bulkPlans
}

// New returns a console.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("console token: %w", err)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, op: cfg.Operator, token: hex.EncodeToString(b), pages: p,
		census: censusCache{every: cfg.CensusEvery}, flash: flashes{m: map[string]string{}}}, nil
}

// Listen listens on addr, which must be on 127.0.0.1 (CheckAddr).
func Listen(addr string) (net.Listener, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("console: listen: %w", err)
	}
	return l, nil
}

// CheckAddr says why the console may not listen on addr, if it may not: it
// must be 127.0.0.1:PORT ("127.0.0.1:0" for a free port; "localhost" means
// 127.0.0.1). The console acts on the deployment with the operator's
// credentials, so it never listens where another machine could reach it.
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: listen address %q: %w", addr, err)
	}
	if host != "127.0.0.1" && host != "localhost" {
		return fmt.Errorf("console: refusing to listen on %q: the console listens on 127.0.0.1 only "+
			"(it resubmits and cancels orders with your credentials); use --listen 127.0.0.1:PORT", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("console: listen address %q: %q is not a port", addr, port)
	}
	return nil
}

// URL is the console's address for a listener from Listen.
func URL(l net.Listener) string { return "http://" + l.Addr().String() + "/" }

// Serve serves the console on l until ctx ends, then shuts down (requests in
// flight get five seconds).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(l.Addr().String()), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// Handler is the console's HTTP handler for requests addressed to addr
// ("127.0.0.1:PORT", the listener's address).
func (s *Server) Handler(addr string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", staticHandler())
	mux.HandleFunc("GET /{$}", s.orders)
	mux.HandleFunc("GET /orders/{id}", s.order)
	mux.HandleFunc("GET /orders/{id}/{action}", s.confirmOrder)
	mux.HandleFunc("POST /orders/{id}/{action}", s.actOnOrder)
	mux.HandleFunc("GET /bulk", s.bulkDryRun)
	mux.HandleFunc("GET /bulk/{id}", s.bulkReport)
	mux.HandleFunc("POST /bulk/{id}", s.bulkRun)
	mux.HandleFunc("GET /dlq", s.deadLetters)
	mux.HandleFunc("GET /dlq/{queue}/redrive", s.confirmRedrive)
	mux.HandleFunc("POST /dlq/{queue}/redrive", s.redrive)
	mux.HandleFunc("GET /alerts", s.alerts)
	mux.HandleFunc("GET /agents", s.agents)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /agents/{name}/{action}", s.actOnAgent)
	mux.HandleFunc("GET /faults", s.faults)
	mux.HandleFunc("POST /faults", s.changeFaults)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("There is no page %s.", r.URL.Path))
	})
	return s.guard(addr, mux)
}
