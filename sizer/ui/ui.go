// Package ui is burst-sizer's web dashboard, served by `burst-sizer serve`
// at /ui: Fleet now, Jobs, Money and Right-sizing, read from sizer/dash
// for the caller's scope (the admin token: every account; an account
// credential: its own).
//
// It works offline and loads nothing from elsewhere: html/template pages,
// one embedded style sheet, charts drawn on the server as inline SVG
// (internal/svgchart), no JavaScript at all. Every response carries a
// strict Content-Security-Policy (default-src 'self'; script-src 'none').
// Every figure carries a data-k attribute naming its path in the JSON of
// the matching /v1 view (e.g. data-k="accounts/0/spent_usd" on the Money
// page is GET /v1/money's .accounts[0].spent_usd), so a test can check
// what a browser shows against the API.
package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/sizer/dash"
)

//go:embed templates/*.html static/*
var files embed.FS

// Options configure the dashboard. Source and Verify are required.
type Options struct {
	Source *dash.Source
	// Verify checks a token (the sizer's auth.Verify with its admin token).
	Verify func(token string) (auth.Principal, error)
	Logger *slog.Logger
	Now    func() time.Time
	// SessionTTL is how long a login lasts (default 8 hours); MaxSessions
	// bounds the sessions kept (default 10,000; the oldest go first).
	SessionTTL  time.Duration
	MaxSessions int
}

// UI is the dashboard.
type UI struct {
	o      Options
	log    *slog.Logger
	pages  map[string]*template.Template
	static fs.FS
	ses    *sessions
	lim    *limiter
}

// CSP is the dashboard's Content-Security-Policy: its own origin only, no
// script of any kind, no framing.
const CSP = "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// partials are the templates a page includes beside its own.
var partials = map[string][]string{"money": {"templates/reservations.html"}}

// New parses the templates.
func New(o Options) (*UI, error) {
	if o.Source == nil || o.Verify == nil {
		return nil, errors.New("dashboard: a data source and a token verifier are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	u := &UI{o: o, log: o.Logger, pages: map[string]*template.Template{}, ses: newSessions(o.SessionTTL, o.MaxSessions, o.Now), lim: &limiter{max: 20}}
	st, err := fs.Sub(files, "static")
	if err != nil {
		return nil, err
	}
	u.static = st
	for _, p := range []string{"login", "fleet", "jobs", "job", "money", "rightsizing", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, append([]string{"templates/layout.html", "templates/" + p + ".html"}, partials[p]...)...)
		if err != nil {
			return nil, fmt.Errorf("dashboard: parsing the %s page: %w", p, err)
		}
		u.pages[p] = t
	}
	return u, nil
}

// Handler serves /ui/.
func (u *UI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/login", u.loginPage)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.HandleFunc("POST /ui/logout", u.logout)
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(u.static)))
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/fleet", http.StatusSeeOther) })
	mux.Handle("GET /ui/fleet", u.authed(u.fleet))
	mux.Handle("GET /ui/jobs", u.authed(u.jobs))
	mux.Handle("GET /ui/jobs/{id}", u.authed(u.job))
	mux.Handle("GET /ui/money", u.authed(u.money))
	mux.Handle("GET /ui/rightsizing", u.authed(u.rightSizing))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, http.StatusNotFound, "No such page.")
	})
	return u.headers(mux)
}

// headers sets the security headers on every answer and refuses a token
// in the URL (it would end up in logs, history and Referer headers).
func (u *UI) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: under no-referrer browsers send
		// "Origin: null" with form posts, and the login checks Origin
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if strings.HasPrefix(r.URL.Path, "/ui/static/") {
			h.Set("Cache-Control", "max-age=3600")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		q := r.URL.Query()
		for _, k := range []string{"token", "access_token", "auth", "bearer"} {
			if q.Has(k) {
				u.fail(w, r, http.StatusBadRequest, "A token is never accepted in a URL (it would be kept in logs and browser history). Log in on the login page instead.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

type authedHandler func(w http.ResponseWriter, r *http.Request, sc dash.Scope, who auth.Principal)

// authed resolves the caller (session cookie, or a bearer header for
// scripts) and the scope it may read; without one a page redirects to the
// login page.
func (u *UI) authed(h authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := u.ses.get(sessionID(r))
		if !ok {
			if tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
				var err error
				if p, err = u.o.Verify(strings.TrimSpace(tok)); err != nil {
					u.fail(w, r, http.StatusUnauthorized, "Invalid bearer token.")
					return
				}
				ok = true
			}
		}
		if !ok {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		sc, err := dash.ScopeFor(p, r.URL.Query().Get("account"))
		if err != nil {
			u.fail(w, r, http.StatusForbidden, "This login may not read that: "+strings.TrimPrefix(err.Error(), "forbidden: ")+".")
			return
		}
		h(w, r, sc, p)
	})
}

// render writes page name with data; a failure before anything was sent
// is a 500 page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var b strings.Builder
	if err := u.pages[name].Execute(&b, data); err != nil {
		u.log.Error("rendering dashboard page", "page", name, "err", err)
		if name != "error" {
			u.fail(w, r, http.StatusInternalServerError, "The page could not be drawn; the sizer's log says why.")
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

type errorPage struct {
	basePage
	Status  int
	Message string
}

func (u *UI) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p, _ := u.ses.get(sessionID(r))
	u.render(w, r, status, "error", errorPage{basePage: u.base("", p, dash.Scope{Account: p.Account}), Status: status, Message: msg})
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "login", loginPage{basePage: u.base("login", auth.Principal{}, dash.Scope{}), Insecure: insecure(r)})
}

type loginPage struct {
	basePage
	Error    string
	Insecure bool
}

// insecure: plain HTTP to something other than this machine.
func insecure(r *http.Request) bool {
	if r.TLS != nil {
		return false
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// MaxLoginBody bounds the login form.
const MaxLoginBody = 4096

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	now := u.o.Now()
	if !sameOrigin(r) {
		u.log.Warn("dashboard login refused: cross-site request", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"))
		u.fail(w, r, http.StatusForbidden, "Cross-site login refused.")
		return
	}
	if !u.lim.allow(r.RemoteAddr, now) {
		u.fail(w, r, http.StatusTooManyRequests, "Too many failed logins; try again in a second.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxLoginBody)
	if err := r.ParseForm(); err != nil {
		u.fail(w, r, http.StatusBadRequest, "The login form could not be read.")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	p, err := u.o.Verify(tok)
	if err == nil && !p.Admin && p.Account == "" {
		err = errors.New("node and route credentials have no dashboard")
	}
	if err != nil {
		u.lim.failed(r.RemoteAddr, now)
		u.log.Warn("dashboard login failed", "remote", r.RemoteAddr)
		u.render(w, r, http.StatusUnauthorized, "login", loginPage{basePage: u.base("login", auth.Principal{}, dash.Scope{}), Insecure: insecure(r),
			Error: "That is not the sizer's admin token nor an account credential (burst-sizer token account NAME)."})
		return
	}
	id, err := u.ses.create(p)
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, "No session could be made.")
		return
	}
	setCookie(w, r, id, int(u.o.SessionTTL/time.Second))
	u.log.Info("dashboard login", "remote", r.RemoteAddr, "admin", p.Admin, "account", p.Account)
	http.Redirect(w, r, "/ui/fleet", http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		u.fail(w, r, http.StatusForbidden, "Cross-site logout refused.")
		return
	}
	if id := sessionID(r); id != "" {
		u.ses.end(id)
	}
	setCookie(w, r, "", -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
