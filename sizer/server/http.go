package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
	"github.com/burst-hpc/burst/sizer/store"
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
	s.mux.HandleFunc("POST "+sizerapi.PathNodeCredential, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := s.serveIdentity(w, r)
		s.requests.WithLabelValues("node_credential", strconv.Itoa(code)).Inc()
		s.latency.WithLabelValues("node_credential").Observe(time.Since(start).Seconds())
	})
	s.handle("POST "+sizerapi.PathNodeRenew, "node_renew", roleNode, s.renewCredential)
	s.handle("POST "+sizerapi.PathRank, "rank", roleAdmin, s.rank)
	s.handle("POST "+sizerapi.PathRoute, "route", roleRoute, s.route)
	s.handle("POST "+sizerapi.PathReports, "reports", roleNode, s.reports)
	s.handle("POST "+sizerapi.PathInterruptions, "interruptions", roleNode, s.interruption)
	s.handle("POST "+sizerapi.PathBoots, "boots", roleNode, s.boot)
	s.handle("POST "+sizerapi.PathInstanceLaunch, "launch", roleAdmin, s.launch)
	s.handle("POST "+sizerapi.PathInstanceTerminate, "terminate", roleAdmin, s.terminate)
	s.handle("POST "+sizerapi.PathJobStart, "job_start", roleAdmin, s.jobStart)
	s.handle("POST "+sizerapi.PathJobEnd, "job_end", roleAdmin, s.jobEnd)
	s.handle("GET "+sizerapi.PathBudgets, "budgets", roleRead, s.budgets)
	s.handle("GET "+sizerapi.PathReport, "report", roleRead, s.report)
	s.ledgerRoutes()
	s.admissionRoutes()
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
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.handle("GET /metrics", "metrics", roleReadOnly, func(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
		metrics.ServeHTTP(w, r)
		return raw{}, nil
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sizerapi.HeaderVersion, version.Version)
		io.WriteString(w, "ok "+version.Version+"\n")
	})
}

// raw marks a handler that wrote its own answer.
type raw struct{}

// role is who may call an endpoint besides the admin.
type role int

const (
	roleAdmin    role = iota // admin token only
	roleNode                 // admin, or a node credential (acting on its own instance)
	roleRoute                // admin, or the route credential
	roleReadOnly             // admin, or the read-only credential (metrics: every account's figures)
	roleRead                 // admin, the read-only credential, or an account credential (the handler scopes the read to its account)
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
	p, err := s.verify(strings.TrimSpace(tok))
	if !ok || err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="burst-sizer"`)
		msg := "missing or invalid bearer token: send the admin token from sizer.token_file, or the credential of your role"
		if errors.Is(err, auth.ErrExpired) || errors.Is(err, auth.ErrRetired) || errors.Is(err, auth.ErrRevoked) {
			msg = err.Error()
		}
		return writeErr(w, &apiError{401, sizerapi.CodeUnauthorized, msg})
	}
	switch {
	case p.Admin:
	case who == roleNode && p.Node != "":
	case who == roleRoute && p.Route:
	case who == roleReadOnly && p.ReadOnly:
	case who == roleRead && (p.ReadOnly || p.Account != ""):
	default:
		return writeErr(w, &apiError{403, sizerapi.CodeForbidden, "the " + p.Kind() + " credential may not call " + r.URL.Path +
			" (node credentials post their own reports and interruptions; the route credential asks for routes; the read-only one reads metrics, budgets, reports and the dashboard's views; account credentials read their own account)"})
	}
	s.notePeer(r, p)
	limit := s.o.MaxBodyBytes
	if p.Node != "" {
		if ok, wait := s.nodeLimit.allow(p.InstanceID); !ok {
			return rateLimited(w, wait, "node "+p.Node)
		}
		ni, err := s.checkNode(r.Context(), p)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				ae = &apiError{500, sizerapi.CodeInternal, err.Error()}
			}
			return writeErr(w, ae)
		}
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, ni))
		limit = min(limit, s.o.NodeMaxBody)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	out, err := h(w, r, p)
	return s.answer(w, r, out, err)
}

// identityKey carries a node principal's store.NodeIdentity in the request context.
type identityKey struct{}

func nodeIdentity(r *http.Request) store.NodeIdentity {
	ni, _ := r.Context().Value(identityKey{}).(store.NodeIdentity)
	return ni
}

// serveIdentity is the identity exchange: no bearer token, limited per
// client address and in size.
func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request) int {
	if ok, wait := s.ipLimit.allow(clientIP(r)); !ok {
		return rateLimited(w, wait, clientIP(r))
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxCredentialRequest)
	out, err := s.nodeCredential(w, r)
	return s.answer(w, r, out, err)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, out any, err error) int {
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
	if _, ok := out.(raw); ok {
		return 200
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
		return badRequest("decoding the request body: %s", jsonProblem(err))
	}
	if dec.More() {
		return badRequest("trailing data after the JSON object")
	}
	return nil
}

// jsonProblem is a decoding error in the API's terms: the JSON field and
// the kind of value it wants, never a Go type name.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("field %s: want %s, got a JSON %s", field, jsonKind(te.Type), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.Is(err, io.EOF):
		return "empty body: send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	// DisallowUnknownFields: `json: unknown field "x"`
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		if t.String() == "time.Time" {
			return "an RFC 3339 time string"
		}
		return "an object"
	}
	return "another kind of value"
}
