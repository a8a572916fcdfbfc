package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
)

// Sessions: a browser cannot send a bearer header by itself, so the token
// is POSTed once to /ui/login and exchanged for a random session id in a
// cookie (HttpOnly, SameSite=Strict, Secure and __Host- prefixed over
// TLS). The server keeps the session -> principal map in memory (a restart
// logs everyone out); the token itself is never stored, put in a URL or
// logged.

// CookieName is the session cookie over plain HTTP; over TLS it is
// "__Host-" + CookieName (Secure, Path=/, no Domain).
const CookieName = "burst_session"

type session struct {
	p       auth.Principal
	created time.Time
	expires time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[[32]byte]*session
	ttl time.Duration
	max int
	now func() time.Time
}

func newSessions(ttl time.Duration, maxN int, now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, ttl: ttl, max: maxN, now: now}
}

// key: sessions are looked up by the hash of their id, so the map holds no
// usable cookie value.
func key(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// create starts a session for p and returns its id.
func (s *sessions) create(p auth.Principal) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		s.prune(now)
	}
	for len(s.m) >= s.max { // still full: drop the oldest
		var oldest [32]byte
		var t time.Time
		for k, v := range s.m {
			if t.IsZero() || v.created.Before(t) {
				oldest, t = k, v.created
			}
		}
		delete(s.m, oldest)
	}
	s.m[key(id)] = &session{p: p, created: now, expires: now.Add(s.ttl)}
	return id, nil
}

func (s *sessions) prune(now time.Time) {
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
}

// get returns the principal of a live session.
func (s *sessions) get(id string) (auth.Principal, bool) {
	if id == "" || len(id) > 100 {
		return auth.Principal{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key(id)]
	if !ok {
		return auth.Principal{}, false
	}
	if !s.now().Before(v.expires) {
		delete(s.m, key(id))
		return auth.Principal{}, false
	}
	return v.p, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.m, key(id))
	s.mu.Unlock()
}

func cookieName(r *http.Request) string {
	if r.TLS != nil {
		return "__Host-" + CookieName
	}
	return CookieName
}

func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func sessionID(r *http.Request) string {
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return ""
	}
	return c.Value
}

// sameOrigin refuses cross-site POSTs (login CSRF, forced logout): a
// browser sends Sec-Fetch-Site and Origin with every POST; when present
// they must name this site.
func sameOrigin(r *http.Request) bool {
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" && sfs != "same-origin" && sfs != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}

// limiter bounds failed logins per second per client address (the TCP
// peer's IP, never a header a client sets): tokens are 256-bit secrets, so
// this only keeps a flood of guesses cheap, and one client's flood does
// not lock the others out (issue 25: one global counter did). At most
// maxClients addresses are tracked in a second; beyond that the newcomers
// share one count.
type limiter struct {
	mu     sync.Mutex
	second time.Time
	n      map[string]int
	max    int
}

const maxClients = 10000

func (l *limiter) key(addr string, now time.Time) string {
	s := now.Truncate(time.Second)
	if !s.Equal(l.second) || l.n == nil {
		l.second, l.n = s, map[string]int{}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if _, ok := l.n[host]; !ok && len(l.n) >= maxClients {
		return "overflow"
	}
	return host
}

func (l *limiter) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[l.key(addr, now)] < l.max
}

func (l *limiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[l.key(addr, now)]++
}
