package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/ui"
	"github.com/burst-hpc/burst/sizer/ui/uitest"
)

const (
	xssName    = `<script>window.pwned=1</script>"><img src=x onerror=alert(1)>`
	xssComment = `burst: params=1B </code><script>alert(2)</script>`
)

var onAttr = regexp.MustCompile(`<[^>]*\son[a-z]+=`)

type rig struct {
	src    *dash.Source
	admin  string
	byAcct map[string][]string
	logs   *bytes.Buffer
	srv    *httptest.Server
}

func newRig(t *testing.T, tls bool) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	byAcct, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 40, Now: now, Live: 3, JobName: xssName, Comment: xssComment, Waits: true})
	if err != nil {
		t.Fatal(err)
	}
	addReservation(t, ctx, st, now)
	pol, err := sizing.New(catalog.Default(), "us-east-1", dashtest.Classes(), sizing.Params{})
	if err != nil {
		t.Fatal(err)
	}
	// the views' clock is frozen at the fill's now: live instances bill by
	// the second, so a page and the API view read a moment apart would
	// differ in the last shown digit
	src, err := dash.New(dash.Options{Store: st, Policy: pol, Budgets: map[string]float64{"nlp": 50, "vision": 1},
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := auth.Generate()
	logs := &bytes.Buffer{}
	u, err := ui.New(ui.Options{Source: src, Verify: func(tok string) (auth.Principal, error) { return auth.Verify(admin, tok, time.Now(), nil) },
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{src: src, admin: admin, byAcct: byAcct, logs: logs}
	if tls {
		r.srv = httptest.NewTLSServer(u.Handler())
	} else {
		r.srv = httptest.NewServer(u.Handler())
	}
	t.Cleanup(r.srv.Close)
	return r
}

// browser is an HTTP client that keeps cookies and does not follow redirects.
func (r *rig) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := r.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func (r *rig) login(t *testing.T, c *http.Client, tok string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", r.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestUnauthenticatedIsSentToLogin(t *testing.T) {
	r := newRig(t, false)
	c := r.browser(t)
	for _, p := range []string{"/ui/fleet", "/ui/jobs", "/ui/jobs/1000", "/ui/money", "/ui/rightsizing"} {
		code, _, h := get(t, c, r.srv.URL+p)
		if code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /ui/login", p, code, h.Get("Location"))
		}
	}
	code, body, h := get(t, c, r.srv.URL+"/ui/login")
	if code != 200 || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `method="post"`) {
		t.Fatalf("login page: %d %s", code, body)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
		if h.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, h.Get(k), want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("the login page loads a script or something from elsewhere")
	}
}

func TestLoginAndPagesMatchTheViews(t *testing.T) {
	r := newRig(t, false)
	c := r.browser(t)
	if resp := r.login(t, c, "wrong"+r.admin); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", resp.StatusCode)
	}
	node, err := auth.IssueNode(r.admin, auth.NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "l4-1", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{node, auth.RouteToken(r.admin)} {
		if resp := r.login(t, c, tok); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a node or route credential logged in: %d", resp.StatusCode)
		}
	}
	resp := r.login(t, c, r.admin)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/fleet" {
		t.Fatalf("admin login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Header.Get("Set-Cookie")
	for _, want := range []string{ui.CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(ck, want) {
			t.Errorf("cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") || strings.Contains(ck, r.admin) {
		t.Errorf("cookie over plain HTTP: %q", ck)
	}
	if strings.Contains(r.logs.String(), r.admin) {
		t.Error("the token reached the log")
	}
	ctx := context.Background()
	views := map[string]func() (any, error){
		"/ui/fleet":       func() (any, error) { return r.src.Fleet(ctx, dash.Scope{}) },
		"/ui/jobs":        func() (any, error) { return r.src.Jobs(ctx, dash.Scope{}, dash.JobsQuery{}) },
		"/ui/jobs/1003":   func() (any, error) { return r.src.Job(ctx, dash.Scope{}, "1003") },
		"/ui/money":       func() (any, error) { return r.src.Money(ctx, dash.Scope{}) },
		"/ui/rightsizing": func() (any, error) { return r.src.RightSizing(ctx, dash.Scope{}) },
	}
	for p, view := range views {
		code, body, _ := get(t, c, r.srv.URL+p)
		if code != 200 {
			t.Fatalf("GET %s: %d\n%s", p, code, body)
		}
		v, err := view()
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(v)
		figs := uitest.FromHTML(body)
		if len(figs) < 5 {
			t.Errorf("%s shows %d figures", p, len(figs))
		}
		for _, bad := range uitest.Compare(js, figs) {
			t.Errorf("%s: %s", p, bad)
		}
		// each job's wait, split, and each class's waits are shown
		for page, key := range map[string]string{"/ui/jobs": `^jobs/\d+/wait/(total|queue|boot|registration)_s$`, "/ui/jobs/1003": `^wait/(total|queue|boot|registration)_s$`,
			"/ui/fleet": `^classes/\d+/waits/(p50_s|p95_s|jobs)$`} {
			if p == page && uitest.Count(figs, key) < 3 {
				t.Errorf("%s shows %d figures of %s", p, uitest.Count(figs, key), key)
			}
		}
		// the XSS attempts render inert: escaped, never as markup
		for _, evil := range []string{"<script", "<img"} {
			if strings.Contains(body, evil) {
				t.Errorf("%s contains %q unescaped", p, evil)
			}
		}
		if onAttr.MatchString(body) {
			t.Errorf("%s has an element with an on* attribute: %s", p, onAttr.FindString(body))
		}
	}
	_, jobs, _ := get(t, c, r.srv.URL+"/ui/jobs")
	if !strings.Contains(jobs, "&lt;script&gt;window.pwned=1&lt;/script&gt;") {
		t.Error("the jobs page does not show the XSS job name as text")
	}
	_, one, _ := get(t, c, r.srv.URL+"/ui/jobs/1003")
	if !strings.Contains(one, "&lt;/code&gt;&lt;script&gt;alert(2)&lt;/script&gt;") {
		t.Error("the job page does not show the XSS comment as text")
	}
	// logout ends the session
	req, _ := http.NewRequest("POST", r.srv.URL+"/ui/logout", nil)
	req.Header.Set("Origin", r.srv.URL)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %v %v", resp, err)
	}
	if code, _, _ := get(t, c, r.srv.URL+"/ui/fleet"); code != http.StatusSeeOther {
		t.Errorf("after logout /ui/fleet answers %d", code)
	}
}

// TestAccountSeesOnlyItsOwn: an account credential's session shows its
// account's rows only; another account's filter and job pages are refused.
func TestAccountSeesOnlyItsOwn(t *testing.T) {
	r := newRig(t, false)
	c := r.browser(t)
	tok, _ := auth.AccountToken(r.admin, "vision", time.Now().Add(time.Hour), 0)
	if resp := r.login(t, c, tok); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("account login: %d", resp.StatusCode)
	}
	ctx := context.Background()
	sc := dash.Scope{Account: "vision"}
	views := map[string]func() (any, error){
		"/ui/fleet":       func() (any, error) { return r.src.Fleet(ctx, sc) },
		"/ui/jobs":        func() (any, error) { return r.src.Jobs(ctx, sc, dash.JobsQuery{}) },
		"/ui/money":       func() (any, error) { return r.src.Money(ctx, sc) },
		"/ui/rightsizing": func() (any, error) { return r.src.RightSizing(ctx, sc) },
	}
	for p, view := range views {
		code, body, _ := get(t, c, r.srv.URL+p)
		if code != 200 {
			t.Fatalf("GET %s: %d", p, code)
		}
		for _, other := range []string{"nlp", "speech"} {
			if strings.Contains(body, other) {
				t.Errorf("%s as vision mentions account %s", p, other)
			}
		}
		v, _ := view()
		js, _ := json.Marshal(v)
		for _, bad := range uitest.Compare(js, uitest.FromHTML(body)) {
			t.Errorf("%s: %s", p, bad)
		}
	}
	_, jobs, _ := get(t, c, r.srv.URL+"/ui/jobs")
	if n := strings.Count(jobs, `data-row="job"`); n != len(r.byAcct["vision"]) {
		t.Errorf("vision sees %d jobs, owns %d", n, len(r.byAcct["vision"]))
	}
	for _, p := range []string{"/ui/jobs?account=nlp", "/ui/money?account=speech", "/ui/fleet?account=nlp"} {
		if code, _, _ := get(t, c, r.srv.URL+p); code != http.StatusForbidden {
			t.Errorf("GET %s as vision: %d, want 403", p, code)
		}
	}
	if code, body, _ := get(t, c, r.srv.URL+"/ui/jobs/"+r.byAcct["nlp"][0]); code != http.StatusNotFound || strings.Contains(body, "nlp") {
		t.Errorf("nlp's job page as vision: %d", code)
	}
	if code, _, _ := get(t, c, r.srv.URL+"/ui/jobs/"+r.byAcct["vision"][0]); code != 200 {
		t.Errorf("own job page: %d", code)
	}
}

func TestCrossSiteAndTokenInURLRefused(t *testing.T) {
	r := newRig(t, false)
	c := r.browser(t)
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}} {
		req, _ := http.NewRequest("POST", r.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {r.admin}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("cross-site login %v: %d, cookie %q", h, resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	}
	for _, p := range []string{"/ui/login?token=", "/ui/fleet?token=", "/ui/jobs?access_token="} {
		code, body, _ := get(t, c, r.srv.URL+p+r.admin)
		if code != http.StatusBadRequest || strings.Contains(body, r.admin) {
			t.Errorf("GET %s<token>: %d", p, code)
		}
	}
	if strings.Contains(r.logs.String(), r.admin) {
		t.Error("the token reached the log")
	}
	// a bearer header works for scripts, a wrong one does not
	req, _ := http.NewRequest("GET", r.srv.URL+"/ui/money", nil)
	req.Header.Set("Authorization", "Bearer "+r.admin)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("bearer: %v %v", resp, err)
	}
	req.Header.Set("Authorization", "Bearer nope")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong bearer: %v %v", resp, err)
	}
}

func TestTLSCookie(t *testing.T) {
	r := newRig(t, true)
	c := r.browser(t)
	resp := r.login(t, c, r.admin)
	ck := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(ck, "__Host-"+ui.CookieName+"=") || !strings.Contains(ck, "Secure") || !strings.Contains(ck, "Path=/") || strings.Contains(ck, "Domain") {
		t.Fatalf("login over TLS: %d, cookie %q", resp.StatusCode, ck)
	}
	code, body, h := get(t, c, r.srv.URL+"/ui/jobs")
	if code != 200 || !strings.Contains(body, `data-row="job"`) || h.Get("Strict-Transport-Security") == "" {
		t.Errorf("jobs over TLS: %d, HSTS %q", code, h.Get("Strict-Transport-Security"))
	}
	if _, body, _ := get(t, c, r.srv.URL+"/ui/login"); strings.Contains(body, "data-insecure") {
		t.Error("the TLS login page warns of plain HTTP")
	}
}

// TestLoginThrottleIsPerClient: one address's flood of wrong tokens is
// refused (429) but does not lock out another address's right one within
// the same second (issue 25: a global counter did).
func TestLoginThrottleIsPerClient(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, err := sizing.New(catalog.Default(), "us-east-1", dashtest.Classes(), sizing.Params{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := dash.New(dash.Options{Store: st, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := auth.Generate()
	frozen := time.Unix(1_800_000_000, 0) // one second for the whole test
	u, err := ui.New(ui.Options{Source: src, Now: func() time.Time { return frozen },
		Verify: func(tok string) (auth.Principal, error) { return auth.Verify(admin, tok, time.Now(), nil) }})
	if err != nil {
		t.Fatal(err)
	}
	h := u.Handler()
	login := func(from, tok string) int {
		req := httptest.NewRequest("POST", "http://sizer.example/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.RemoteAddr = from
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://sizer.example")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	flooded := false
	for i := 0; i < 100 && !flooded; i++ {
		flooded = login("192.0.2.66:4000", "wrong") == http.StatusTooManyRequests
	}
	if !flooded {
		t.Fatal("100 wrong logins in one second from one address were never throttled")
	}
	if code := login("192.0.2.66:4001", admin); code != http.StatusTooManyRequests {
		t.Errorf("the flooding address (another port) got %d, want 429", code)
	}
	if code := login("198.51.100.7:5000", admin); code != http.StatusSeeOther {
		t.Errorf("another client's admin login during the flood: %d, want 303", code)
	}
}
