// Package server is the burst-sizer daemon: an HTTP JSON API (see internal/sizerapi
// for endpoints) with bearer-token auth, Prometheus metrics and state in
// SQLite (sizer/store). Shutdown is graceful: in-flight requests finish and
// every acknowledged write is committed before the database closes.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/ui"
)

// Options configure the daemon. main maps burst.yaml onto them.
type Options struct {
	Listen    string             // address to listen on, e.g. "127.0.0.1:8470"
	TokenFile string             // admin token file (0600); ignored when Token is set
	Token     string             // admin token itself (tests)
	StateDir  string             // SQLite database directory
	Budgets   map[string]float64 // account -> monthly cap in USD
	Classes   []sizing.Class
	Region    string
	Zones     []string         // zones ranked when a rank request names none
	Catalog   *catalog.Catalog // nil: catalog.Default()
	Params    sizing.Params    // zero: sizing.DefaultParams()

	MaxBodyBytes    int64         // request body limit; default 4 MiB
	AvoidFor        time.Duration // spot offerings of an interrupted (type, zone) are avoided this long; default 30m
	HistoryJobs     int           // past jobs used for learning; default 20
	ShutdownTimeout time.Duration // how long shutdown waits for in-flight requests; default 30s
	Logger          *slog.Logger
	Now             func() time.Time     // default time.Now
	Registry        *prometheus.Registry // default: a new registry with Go/process collectors

	// The dashboard (/ui) and the read-only views: Slurm gives node and job
	// states (nil: the sizer's records only); IdleTimeout is the money
	// view's counterfactual idle time (default 10 minutes).
	Slurm       dash.SlurmReader
	IdleTimeout time.Duration
	// NoUI serves the API without the dashboard.
	NoUI bool
}

// Server is the running daemon's state.
type Server struct {
	o      Options
	token  string
	pol    *sizing.Policy
	st     *store.Store
	log    *slog.Logger
	now    func() time.Time
	reg    *prometheus.Registry
	mux    *http.ServeMux
	closed sync.Once
	dash   *dash.Source
	ui     *ui.UI

	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	records   *prometheus.CounterVec
	interrupt prometheus.Counter
	boots     *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

// New loads the token, builds the policy and opens the store.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.AvoidFor <= 0 {
		o.AvoidFor = 30 * time.Minute
	}
	if o.HistoryJobs <= 0 {
		o.HistoryJobs = DefaultHistoryJobs
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StateDir == "" {
		return nil, errors.New("starting sizer: no state directory; set sizer.state_dir in burst.yaml")
	}
	tok := o.Token
	if tok == "" {
		var err error
		if tok, err = auth.LoadToken(o.TokenFile); err != nil {
			return nil, fmt.Errorf("starting sizer: %w", err)
		}
	}
	pol, err := sizing.New(o.Catalog, o.Region, o.Classes, o.Params)
	if err != nil {
		return nil, fmt.Errorf("starting sizer: %w", err)
	}
	st, err := store.Open(ctx, o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("starting sizer: %w", err)
	}
	s := &Server{o: o, token: tok, pol: pol, st: st, log: o.Logger, now: o.Now, reg: o.Registry}
	if s.dash, err = dash.New(dash.Options{Store: st, Policy: pol, Budgets: o.Budgets, StateDir: o.StateDir, Slurm: o.Slurm, IdleTimeout: o.IdleTimeout, Now: o.Now}); err != nil {
		st.Close()
		return nil, fmt.Errorf("starting sizer: %w", err)
	}
	if !o.NoUI {
		s.ui, err = ui.New(ui.Options{Source: s.dash, Verify: func(tok string) (auth.Principal, error) { return auth.Verify(s.token, tok) }, Logger: o.Logger, Now: o.Now})
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("starting sizer: %w", err)
		}
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_requests_total", Help: "HTTP requests by endpoint and status code."}, []string{"endpoint", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_sizer_request_duration_seconds", Help: "HTTP request latency by endpoint.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"endpoint"})
	s.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_report_records_total", Help: "Agent report records by result (accepted, duplicate)."}, []string{"result"})
	s.interrupt = prometheus.NewCounter(prometheus.CounterOpts{Name: "burst_sizer_interruptions_total", Help: "Spot interruption notices recorded."})
	s.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_decisions_total", Help: "Policy decisions by kind (route, rank) and outcome."}, []string{"kind", "outcome"})
	s.boots = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_boot_phase_seconds",
		Help:    "Node boot phases as the nodes report them: ec2-pending-to-bootstrap (EC2 pending to the bootstrap's start), each bootstrap step (mount is the FSx mount, register slurmd's registration), bootstrap-total.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 16)}, []string{"class", "phase"})
	if err := errors.Join(s.reg.Register(s.requests), s.reg.Register(s.latency), s.reg.Register(s.records), s.reg.Register(s.interrupt), s.reg.Register(s.decisions), s.reg.Register(s.boots),
		s.reg.Register(&budgetCollector{s: s}), s.reg.Register(&nodeCollector{s: s})); err != nil {
		st.Close()
		return nil, fmt.Errorf("starting sizer: registering metrics: %w", err)
	}
	s.routes()
	return s, nil
}

// Policy returns the server's sizing.
func (s *Server) Policy() *sizing.Policy { return s.pol }

// Store returns the server's store.
func (s *Server) Store() *store.Store { return s.st }

// Handler is the HTTP handler (API, dashboard, /metrics, /healthz).
func (s *Server) Handler() http.Handler { return s.mux }

// Close closes the store (checkpointing the WAL). Serve calls it on return.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() { err = s.st.Close() })
	return err
}

// ListenAndServe listens on Options.Listen and serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		s.Close()
		return fmt.Errorf("listening on %s (sizer.listen): %w", s.o.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then stops accepting, waits up to
// ShutdownTimeout for in-flight requests (each commits before it answers)
// and closes the store.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("sizer serving", "addr", ln.Addr().String(), "state", s.st.Path(), "classes", len(s.o.Classes))
	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("serving sizer API: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
		err := hs.Shutdown(sctx)
		cancel()
		<-errc
		if err != nil {
			serveErr = fmt.Errorf("shutting down sizer API: %w", err)
		}
		s.log.Info("sizer stopped accepting requests; closing state")
	}
	return errors.Join(serveErr, s.Close())
}
