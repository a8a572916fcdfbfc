package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

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
	s.handle("POST "+sizerapi.PathRank, "rank", roleAdmin, s.rank)
	s.handle("POST "+sizerapi.PathRoute, "route", roleRoute, s.route)
	s.handle("POST "+sizerapi.PathReports, "reports", roleNode, s.reports)
	s.handle("POST "+sizerapi.PathInterruptions, "interruptions", roleNode, s.interruption)
	s.handle("POST "+sizerapi.PathBoots, "boots", roleNode, s.boot)
	s.handle("POST "+sizerapi.PathInstanceLaunch, "launch", roleAdmin, s.launch)
	s.handle("POST "+sizerapi.PathInstanceTerminate, "terminate", roleAdmin, s.terminate)
	s.handle("GET "+sizerapi.PathBudgets, "budgets", roleRead, s.budgets)
	s.handle("GET "+sizerapi.PathReport, "report", roleRead, s.report)
	s.handle("GET "+sizerapi.PathFleet, "fleet", roleRead, s.fleet)
	s.handle("GET "+sizerapi.PathJobs, "jobs", roleRead, s.jobs)
	s.handle("GET "+sizerapi.PathJobs+"/{id}", "job", roleRead, s.job)
	s.handle("GET "+sizerapi.PathMoney, "money", roleRead, s.money)
	s.handle("GET "+sizerapi.PathRightSizing, "rightsizing", roleRead, s.rightSizing)
	if s.ui != nil {
		ui := s.ui.Handler()
		s.mux.Handle("/ui/", s.instrument("ui", ui))
		s.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
		s.mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
}

// role is who may call an endpoint besides the admin.
type role int

const (
	roleAdmin role = iota // admin token only
	roleNode              // admin, or a node credential (the handler checks the node)
	roleRoute             // admin, or the route credential
	roleRead              // admin, or an account credential (the handler scopes the read)
)

func (s *Server) handle(pattern, name string, who role, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := s.serveAPI(w, r, who, h)
		s.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
		s.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
	})
}

// instrument counts and times a plain handler like the API's endpoints.
func (s *Server) instrument(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: 200}
		h.ServeHTTP(sw, r)
		s.requests.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		s.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

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
	case who == roleRead && p.Account != "":
	default:
		return writeErr(w, &apiError{403, sizerapi.CodeForbidden, "this credential may not call " + r.URL.Path + " (node credentials post reports and interruptions; the route credential asks for routes; account credentials read their account)"})
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
