// Package server is the burst-sizer daemon: an HTTPS JSON API (see
// internal/sizerapi for endpoints) with bearer-token auth by role, the node
// identity exchange (nodecred.go), trust rules for what nodes report
// (trust.go), per-node rate and size limits, Prometheus metrics (behind the
// read-only token, or on a loopback listener) and state in SQLite
// (sizer/store). Shutdown is graceful: in-flight requests finish and every
// acknowledged write is committed before the database closes.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/ui"
)

// Options configure the daemon. main maps burst.yaml onto them.
type Options struct {
	Listen    string // address to listen on, e.g. "127.0.0.1:8470"
	TokenFile string // admin token file (0600); ignored when Token is set
	Token     string // admin token itself (tests)
	StateDir  string // SQLite database directory
	// Store chooses the database; a zero Store is SQLite in StateDir.
	Store     store.Config
	Budgets   map[string]float64 // account -> monthly cap in USD
	OnUnknown map[string]string  // account -> budgets[].on_unknown (hold or allow)
	IdleOwner string             // accounting.idle_owner: launching-job (default) or pool
	// LedgerSync runs a ledger pass against EC2 (POST /v1/ledger/sync);
	// nil: the endpoint says the sizer has no EC2 access. An error wrapping
	// ErrNotLeader (a standby) or store.ErrDeposed answers 503 not_leader,
	// so a client with several sizer URLs asks the next.
	LedgerSync func(ctx context.Context) (sizerapi.LedgerSync, error)
	Classes    []sizing.Class
	Region     string
	Zones      []string         // zones ranked when a rank request names none
	Catalog    *catalog.Catalog // nil: catalog.Default()
	Params     sizing.Params    // zero: sizing.DefaultParams()
	// AcceptSimulatedGPUs learns from simulated GPU reports too (a test
	// stack: sizer.accept_simulated_gpus); otherwise only NVML reports count.
	AcceptSimulatedGPUs bool

	// RouteAuth, when set, authenticates the user behind each route
	// request made with the route credential from the MUNGE credential in
	// its X-Burst-Munge header (sizer.route_auth: munge): the decision is
	// for that user, whatever the body claims. nil: the body's user is
	// taken as given (sizer.route_auth: token).
	RouteAuth RouteAuthenticator

	// TLS: the server certificate and key (PEM; `burst-sizer tls init`
	// writes them). ListenAndServe refuses to serve without them.
	TLSCertFile, TLSKeyFile string
	// MetricsListen, when set, also serves GET /metrics without a token,
	// in plain HTTP, on this loopback address (for a local Prometheus).
	MetricsListen string

	// The node identity exchange: the cluster the instances must be tagged
	// for, the account they must belong to ("" = any), the certificates that
	// verify identity documents (AWS's regional one; the emulator's in
	// tests), EC2 to ask about instances, and how long a credential lasts
	// (default 1h; nodes renew at half of it).
	Cluster       string
	Account       string
	IdentityCerts []*x509.Certificate
	EC2           EC2API
	CredentialTTL time.Duration
	// ClockSkew is how far a node's clock may run ahead (default 2m).
	ClockSkew time.Duration
	// Per node credential: requests per second and burst (defaults 10, 200;
	// negative rate disables), largest body (default 2 MiB) and most
	// records per batch (default 2000). The identity exchange is limited
	// per client address (1/s, burst 20).
	NodeRate       float64
	NodeBurst      int
	NodeMaxBody    int64
	NodeMaxRecords int

	MaxBodyBytes    int64         // request body limit (admin); default 4 MiB
	AvoidFor        time.Duration // spot offerings of an interrupted (type, zone) are avoided this long; default 30m
	HistoryJobs     int           // past jobs used for learning; default 20
	ShutdownTimeout time.Duration // how long shutdown waits for in-flight requests; default 30s
	Logger          *slog.Logger
	Now             func() time.Time     // default time.Now
	Registry        *prometheus.Registry // default: a new registry with Go/process collectors

	// Slurm answers which jobs ran on a node (trust.go) and gives the
	// dashboard (/ui) and the read-only views node and job states; nil:
	// only the sizer's own records count. IdleTimeout is the money
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
	rot    *auth.RotationFile // <token_file>.accounts; nil with Options.Token
	pol    *sizing.Policy
	st     *store.Store
	months *spend.Reader // the month's ledger, kept between reads (budgets, dashboard)
	log    *slog.Logger
	now    func() time.Time
	reg    *prometheus.Registry
	mux    *http.ServeMux
	closed sync.Once
	dash   *dash.Source
	ui     *ui.UI

	tls       *tls.Config
	nodeLimit *limiter
	ipLimit   *limiter
	jobCache  jobCache
	peers     *peerVersions

	requests    *prometheus.CounterVec
	credentials *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	records     *prometheus.CounterVec
	interrupt   prometheus.Counter
	gpuHealth   *prometheus.CounterVec
	boots       *prometheus.HistogramVec
	decisions   *prometheus.CounterVec
	runs        *prometheus.CounterVec
}

// New loads the token, builds the policy and opens the store.
func New(ctx context.Context, o Options) (*Server, error) {
	o = o.withDefaults()
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
	var sopts []store.Option
	if o.AcceptSimulatedGPUs {
		sopts = append(sopts, store.AcceptSimulatedGPUs())
		o.Logger.Warn("learning from simulated GPU reports (sizer.accept_simulated_gpus): a test stack, never production")
	}
	scfg := o.Store
	if scfg.Dir == "" {
		scfg.Dir = o.StateDir
	}
	if scfg.Cluster == "" {
		scfg.Cluster = o.Cluster // the ledger records this cluster's launches and runs
	}
	st, err := store.OpenConfig(ctx, scfg, sopts...)
	if err != nil {
		return nil, fmt.Errorf("starting sizer: %w", err)
	}
	s := &Server{o: o, token: tok, pol: pol, st: st, log: o.Logger, now: o.Now, reg: o.Registry,
		nodeLimit: newLimiter(o.NodeRate, o.NodeBurst, o.Now), ipLimit: newLimiter(1, 20, o.Now), peers: newPeerVersions()}
	s.months = spend.NewReader(st, s.onDemand)
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("starting sizer: loading its TLS certificate (sizer.tls.cert_file, key_file; `burst-sizer tls init` makes them): %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if s.dash, err = dash.New(dash.Options{Store: st, Spend: s.months, Policy: pol, Budgets: o.Budgets, OnUnknown: o.OnUnknown, IdleOwner: o.IdleOwner, StateDir: o.StateDir, Cluster: o.Cluster, Slurm: o.Slurm, IdleTimeout: o.IdleTimeout, Now: o.Now, Peers: s.peers.list, Logger: o.Logger}); err != nil {
		st.Close()
		return nil, fmt.Errorf("starting sizer: %w", err)
	}
	if o.Token == "" {
		s.rot = &auth.RotationFile{Path: o.TokenFile + auth.RotationsSuffix}
	}
	if !o.NoUI {
		s.ui, err = ui.New(ui.Options{Source: s.dash, Verify: s.verify, Logger: o.Logger, Now: o.Now})
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("starting sizer: %w", err)
		}
	}
	if err := s.registerMetrics(); err != nil {
		st.Close()
		return nil, fmt.Errorf("starting sizer: registering metrics: %w", err)
	}
	s.routes()
	return s, nil
}

// withDefaults fills in the options left zero.
func (o Options) withDefaults() Options {
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
	if o.CredentialTTL <= 0 {
		o.CredentialTTL = time.Hour
	}
	if o.ClockSkew <= 0 {
		o.ClockSkew = 2 * time.Minute
	}
	if o.NodeRate == 0 {
		o.NodeRate = 10
	}
	if o.NodeBurst <= 0 {
		o.NodeBurst = 200
	}
	if o.NodeMaxBody <= 0 {
		o.NodeMaxBody = 2 << 20
	}
	if o.NodeMaxRecords <= 0 {
		o.NodeMaxRecords = 2000
	}
	if o.IdleOwner == "" {
		o.IdleOwner = "launching-job"
	}
	return o
}

// registerMetrics makes the sizer's metrics and registers them, with the
// budget and node collectors, on its registry.
func (s *Server) registerMetrics() error {
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_requests_total", Help: "HTTP requests by endpoint and status code."}, []string{"endpoint", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_sizer_request_duration_seconds", Help: "HTTP request latency by endpoint.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"endpoint"})
	s.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_report_records_total", Help: "Agent report records by result (accepted, duplicate, ignored: simulated GPUs, not learned from)."}, []string{"result"})
	s.interrupt = prometheus.NewCounter(prometheus.CounterOpts{Name: "burst_sizer_interruptions_total", Help: "Spot interruption notices recorded."})
	s.gpuHealth = newGPUHealthMetric()
	s.credentials = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_node_credentials_total", Help: "Node credentials by outcome (issued, renewed, revoked)."}, []string{"outcome"})
	s.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_decisions_total", Help: "Policy decisions by kind (route, rank) and outcome."}, []string{"kind", "outcome"})
	s.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_job_runs_total", Help: "Job runs recorded for learning, by event (started, ended, oom)."}, []string{"event"})
	s.boots = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_boot_phase_seconds",
		Help:    "Node boot phases as the nodes report them: ec2-pending-to-bootstrap (EC2 pending to the bootstrap's start), each bootstrap step (mount is the FSx mount, register slurmd's registration), bootstrap-total.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 16)}, []string{"class", "phase"})
	return errors.Join(s.reg.Register(s.requests), s.reg.Register(s.latency), s.reg.Register(s.records), s.reg.Register(s.interrupt), s.reg.Register(s.gpuHealth), s.reg.Register(s.decisions), s.reg.Register(s.credentials), s.reg.Register(s.runs), s.reg.Register(s.boots), s.reg.Register(s.peers.metric),
		s.reg.Register(&budgetCollector{s: s}), s.reg.Register(&nodeCollector{s: s}))
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

// ListenAndServe listens on Options.Listen (HTTPS only: a plain-HTTP
// request is answered 400 and goes no further) and, when set, on
// Options.MetricsListen (plain HTTP, /metrics only, loopback), and serves
// until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if s.tls == nil {
		s.Close()
		return errors.New("starting sizer: no TLS certificate; run `burst-sizer tls init` (or set sizer.tls.cert_file and key_file): the sizer serves HTTPS only")
	}
	ln, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		s.Close()
		return fmt.Errorf("listening on %s (sizer.listen): %w", s.o.Listen, err)
	}
	if s.o.MetricsListen != "" {
		mln, err := listenLoopback(s.o.MetricsListen)
		if err != nil {
			ln.Close()
			s.Close()
			return err
		}
		ms := &http.Server{Handler: s.metricsOnly(), ReadHeaderTimeout: 10 * time.Second}
		go ms.Serve(mln)
		go func() { <-ctx.Done(); ms.Close() }()
		s.log.Info("sizer metrics on loopback", "addr", mln.Addr().String())
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln (TLS when the server has a certificate) until ctx is
// done, then stops accepting, waits up to ShutdownTimeout for in-flight
// requests (each commits before it answers) and closes the store.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slogErrorLog(s.log)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("sizer serving", "addr", ln.Addr().String(), "tls", s.tls != nil, "state", s.st.Path(), "classes", len(s.o.Classes))
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

// verify checks a bearer token: the admin token, the credentials derived
// from it, account credentials' expiry and rotation (<token_file>.accounts,
// re-read when it changes).
func (s *Server) verify(tok string) (auth.Principal, error) {
	var gens auth.AccountGenerations
	if s.rot != nil {
		gens = s.rot.Generation
	}
	p, err := auth.Verify(s.token, tok, s.now(), gens)
	if err != nil && s.rot != nil {
		if rerr := s.rot.Err(); rerr != nil {
			s.log.Error("account credentials refused", "err", rerr)
		}
	}
	return p, err
}
