// Package server is the burst-sizer daemon: an HTTP JSON API (see internal/sizerapi
// for endpoints) with bearer-token auth, Prometheus metrics and state in
// SQLite (sizer/store). Shutdown is graceful: in-flight requests finish and
// every acknowledged write is committed before the database closes.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/store"
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

	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	records   *prometheus.CounterVec
	interrupt prometheus.Counter
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
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_requests_total", Help: "HTTP requests by endpoint and status code."}, []string{"endpoint", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_sizer_request_duration_seconds", Help: "HTTP request latency by endpoint.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"endpoint"})
	s.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_report_records_total", Help: "Agent report records by result (accepted, duplicate)."}, []string{"result"})
	s.interrupt = prometheus.NewCounter(prometheus.CounterOpts{Name: "burst_sizer_interruptions_total", Help: "Spot interruption notices recorded."})
	s.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_decisions_total", Help: "Policy decisions by kind (route, rank) and outcome."}, []string{"kind", "outcome"})
	if err := errors.Join(s.reg.Register(s.requests), s.reg.Register(s.latency), s.reg.Register(s.records), s.reg.Register(s.interrupt), s.reg.Register(s.decisions), s.reg.Register(&budgetCollector{s: s})); err != nil {
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

// Handler is the HTTP handler (API, /metrics, /healthz).
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

type handler func(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error)

// apiError is an error with an HTTP status and API code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{400, sizerapi.CodeBadRequest, fmt.Sprintf(format, args...)}
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.handle("POST /v1/rank", "rank", roleAdmin, s.rank)
	s.handle("POST /v1/route", "route", roleRoute, s.route)
	s.handle("POST /v1/reports", "reports", roleNode, s.reports)
	s.handle("POST /v1/interruptions", "interruptions", roleNode, s.interruption)
	s.handle("POST /v1/instances/launch", "launch", roleAdmin, s.launch)
	s.handle("POST /v1/instances/terminate", "terminate", roleAdmin, s.terminate)
	s.handle("GET /v1/budgets", "budgets", roleAdmin, s.budgets)
	s.handle("GET /v1/report", "report", roleAdmin, s.report)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
}

// role is who may call an endpoint besides the admin.
type role int

const (
	roleAdmin role = iota // admin token only
	roleNode              // admin, or a node credential (the handler checks the node)
	roleRoute             // admin, or the route credential
)

func (s *Server) handle(pattern, name string, who role, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := s.serveAPI(w, r, who, h)
		s.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
		s.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, who role, h handler) int {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, err := auth.Verify(s.token, strings.TrimSpace(tok))
	if !ok || err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="burst-sizer"`)
		return writeErr(w, &apiError{401, sizerapi.CodeUnauthorized, "missing or invalid bearer token: send the admin token from sizer.token_file or the node's credential"})
	}
	switch {
	case p.Admin:
	case who == roleNode && p.Node != "":
	case who == roleRoute && p.Route:
	default:
		return writeErr(w, &apiError{403, sizerapi.CodeForbidden, "this credential may not call " + r.URL.Path + " (node credentials post reports and interruptions; the route credential asks for routes)"})
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
	out, err := h(w, r, p)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			st, code := errCode(err)
			if st == 500 {
				s.log.Error("sizer request failed", "path", r.URL.Path, "err", err)
			}
			ae = &apiError{st, code, err.Error()}
		}
		return writeErr(w, ae)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	json.NewEncoder(w).Encode(out)
	return 200
}

func writeErr(w http.ResponseWriter, e *apiError) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(sizerapi.ErrorResponse{Code: e.code, Message: e.msg})
	return e.status
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{413, sizerapi.CodeTooLarge, fmt.Sprintf("request body over %d bytes; send smaller batches", mbe.Limit)}
		}
		return badRequest("decoding %T: %v", v, err)
	}
	if dec.More() {
		return badRequest("trailing data after the JSON object")
	}
	return nil
}

func (s *Server) rank(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var rq sizerapi.RankRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	req, _ := rq.Job.Policy() // metadata problems were reported at submission; rank with what parses
	in := sizing.RankInput{Class: rq.Class, Request: req, Zones: rq.Zones, EstHours: rq.EstHours}
	if len(in.Zones) == 0 {
		in.Zones = s.o.Zones
	}
	for _, u := range rq.Unavailable {
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: u.InstanceType, Zone: u.Zone, Capacity: jobmeta.Capacity(u.Capacity), Reason: u.Reason})
	}
	now := s.now()
	recent, err := s.st.Interruptions(r.Context(), now.Add(-s.o.AvoidFor))
	if err != nil {
		return nil, err
	}
	var resp sizerapi.RankResponse
	seen := map[[2]string]bool{}
	for _, it := range recent {
		k := [2]string{it.InstanceType, it.Zone}
		if it.InstanceType == "" || seen[k] {
			continue
		}
		seen[k] = true
		reason := fmt.Sprintf("spot %s interrupted at %s", it.InstanceID, it.Time.UTC().Format(time.RFC3339))
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: jobmeta.CapacitySpot, Reason: reason})
		resp.Avoided = append(resp.Avoided, sizerapi.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: string(jobmeta.CapacitySpot), Reason: reason})
	}
	if in.Budget, err = AccountBudget(r.Context(), s.st, s.o.Budgets, req.Account, now); err != nil {
		return nil, err
	}
	offers, err := s.pol.Rank(in)
	if err != nil {
		_, code := errCode(err)
		s.decisions.WithLabelValues("rank", code).Inc()
		return nil, err
	}
	s.decisions.WithLabelValues("rank", "ok").Inc()
	resp.Offerings = offers
	return resp, nil
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var rq sizerapi.RouteRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	d, err := Decide(r.Context(), s.pol, s.st, s.o.Budgets, rq.Job, s.now(), s.o.HistoryJobs)
	if err != nil {
		_, code := errCode(err)
		s.decisions.WithLabelValues("route", code).Inc()
		return nil, err
	}
	outcome := "ok"
	if d.Refused {
		outcome = "refused"
	} else if d.Downsized {
		outcome = "downsized"
	}
	s.decisions.WithLabelValues("route", outcome).Inc()
	return d, nil
}

// MaxRecords bounds one report batch.
const MaxRecords = 10000

func (s *Server) reports(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var b sizerapi.ReportBatch
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	if b.Node == "" {
		return nil, badRequest("report batch has no node name")
	}
	if !p.MayReportFor(b.Node) {
		return nil, &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf("credential of node %s may not report for node %s", p.Node, b.Node)}
	}
	if len(b.Records) > MaxRecords {
		return nil, &apiError{413, sizerapi.CodeTooLarge, fmt.Sprintf("%d records in one batch, at most %d", len(b.Records), MaxRecords)}
	}
	for i, rec := range b.Records {
		switch rec.Kind {
		case sizerapi.KindGPU, sizerapi.KindJobSummary, sizerapi.KindInterruption:
		default:
			return nil, badRequest("records[%d]: unknown kind %q (want gpu, job_summary or interruption)", i, rec.Kind)
		}
		if rec.Kind == sizerapi.KindJobSummary && rec.Summary == nil || rec.Kind == sizerapi.KindInterruption && rec.Event == nil {
			return nil, badRequest("records[%d]: kind %s without its %s field", i, rec.Kind, map[sizerapi.Kind]string{sizerapi.KindJobSummary: "summary", sizerapi.KindInterruption: "event"}[rec.Kind])
		}
	}
	// Commit even if the client goes away: it will resend and dedup keeps it once.
	res, err := s.st.AddBatch(context.WithoutCancel(r.Context()), b)
	if err != nil {
		return nil, err
	}
	s.records.WithLabelValues("accepted").Add(float64(res.Accepted))
	s.records.WithLabelValues("duplicate").Add(float64(res.Duplicates))
	for _, rec := range b.Records {
		if rec.Kind == sizerapi.KindInterruption {
			s.interrupt.Inc()
		}
	}
	return res, nil
}

func (s *Server) interruption(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var in sizerapi.Interruption
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.InstanceID == "" {
		return nil, badRequest("interruption has no instance_id")
	}
	if !p.MayReportFor(in.Node) {
		return nil, &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf("credential of node %s may not report for node %q", p.Node, in.Node)}
	}
	if in.Time.IsZero() {
		in.Time = s.now()
	}
	if err := s.st.AddInterruption(context.WithoutCancel(r.Context()), in); err != nil {
		return nil, err
	}
	s.interrupt.Inc()
	return struct{}{}, nil
}

func (s *Server) launch(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var ev sizerapi.InstanceEvent
	if err := decode(r, &ev); err != nil {
		return nil, err
	}
	if ev.InstanceID == "" || ev.InstanceType == "" {
		return nil, badRequest("launch needs instance_id and instance_type")
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	price := ev.PriceUSD
	if price <= 0 {
		c := jobmeta.Capacity(ev.Capacity)
		if c != jobmeta.CapacitySpot {
			c = jobmeta.CapacityOnDemand
		}
		p, ok := s.pol.HourlyPrice(ev.InstanceType, c)
		if !ok {
			return nil, badRequest("no %s price for %s in the catalog; send price_usd", c, ev.InstanceType)
		}
		price = p
	}
	return struct{}{}, s.st.RecordLaunch(context.WithoutCancel(r.Context()), ev, price)
}

func (s *Server) terminate(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var ev sizerapi.InstanceEvent
	if err := decode(r, &ev); err != nil {
		return nil, err
	}
	if ev.InstanceID == "" {
		return nil, badRequest("terminate needs instance_id")
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	known, err := s.st.RecordTerminate(context.WithoutCancel(r.Context()), ev.InstanceID, ev.Time)
	if err != nil {
		return nil, err
	}
	if !known {
		s.log.Warn("termination of an instance the sizer never saw launch", "instance", ev.InstanceID)
	}
	return struct{}{}, nil
}

func (s *Server) budgetStatuses(ctx context.Context) ([]sizerapi.BudgetStatus, error) {
	now := s.now()
	ivs, err := s.st.Intervals(ctx, budget.MonthStart(now), now)
	if err != nil {
		return nil, err
	}
	var out []sizerapi.BudgetStatus
	for _, b := range budget.Statuses(s.o.Budgets, ivs, now) {
		out = append(out, sizerapi.BudgetStatus{Account: b.Account, MonthlyUSD: b.MonthlyUSD, SpentUSD: b.SpentUSD, RemainingUSD: b.RemainingUSD, Over: b.Over, Since: b.Since})
	}
	return out, nil
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	out, err := s.budgetStatuses(r.Context())
	if out == nil {
		out = []sizerapi.BudgetStatus{}
	}
	return out, err
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	return BuildReport(r.Context(), s.st, s.o.Budgets, s.now())
}

// BuildReport builds the monthly report from a store (shared with
// `burst-sizer report` reading the database directly).
func BuildReport(ctx context.Context, st *store.Store, caps map[string]float64, now time.Time) (sizerapi.UsageReport, error) {
	from := budget.MonthStart(now)
	jobs, err := st.Jobs(ctx, from, "", "", 0)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	ivs, err := st.Intervals(ctx, from, now)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	return report.Build(jobs, ivs, caps, now, report.Options{}), nil
}

// budgetCollector exports per-account spend and caps at scrape time.
type budgetCollector struct{ s *Server }

var (
	spendDesc = prometheus.NewDesc("burst_sizer_account_spend_usd", "Spend this month by account (USD).", []string{"account"}, nil)
	capDesc   = prometheus.NewDesc("burst_sizer_account_budget_usd", "Monthly budget by account (USD).", []string{"account"}, nil)
	overDesc  = prometheus.NewDesc("burst_sizer_account_over_budget", "1 when the account has spent its budget.", []string{"account"}, nil)
)

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendDesc
	ch <- capDesc
	ch <- overDesc
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sts, err := c.s.budgetStatuses(ctx)
	if err != nil {
		c.s.log.Warn("collecting budget metrics", "err", err)
		return
	}
	for _, b := range sts {
		ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.GaugeValue, b.SpentUSD, b.Account)
		if b.MonthlyUSD > 0 {
			ch <- prometheus.MustNewConstMetric(capDesc, prometheus.GaugeValue, b.MonthlyUSD, b.Account)
			over := 0.0
			if b.Over {
				over = 1
			}
			ch <- prometheus.MustNewConstMetric(overDesc, prometheus.GaugeValue, over, b.Account)
		}
	}
}
