package imds

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseInstanceAction(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want InstanceAction
		bad  bool
	}{
		{in: `{"action": "terminate", "time": "2026-11-29T13:31:21Z"}`, want: InstanceAction{"terminate", time.Date(2026, 11, 29, 13, 31, 21, 0, time.UTC)}},
		{in: `{"action":"stop","time":"2026-11-29T14:31:21+01:00"}`, want: InstanceAction{"stop", time.Date(2026, 11, 29, 13, 31, 21, 0, time.UTC)}},
		{in: `{"action":"hibernate","time":"2026-11-29T13:31:21Z","extra":1}`, want: InstanceAction{"hibernate", time.Date(2026, 11, 29, 13, 31, 21, 0, time.UTC)}},
		{in: `{"action":"reboot","time":"2026-11-29T13:31:21Z"}`, bad: true},
		{in: `{"action":"terminate"}`, bad: true},
		{in: `{"time":"2026-11-29T13:31:21Z"}`, bad: true},
		{in: `{"action":"terminate","time":"tomorrow"}`, bad: true},
		{in: `{"action":3,"time":"2026-11-29T13:31:21Z"}`, bad: true},
		{in: `<html>404</html>`, bad: true},
		{in: ``, bad: true},
		{in: `null`, bad: true},
	} {
		got, err := ParseInstanceAction([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: got %+v, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRebalance(t *testing.T) {
	got, err := ParseRebalance([]byte(`{"noticeTime": "2026-11-29T13:29:21Z"}`))
	if err != nil || !got.NoticeTime.Equal(time.Date(2026, 11, 29, 13, 29, 21, 0, time.UTC)) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{``, `{}`, `{"noticeTime":""}`, `{"noticeTime":12}`, `[1]`, `{"noticeTime":"2026-13-01T00:00:00Z"}`} {
		if r, err := ParseRebalance([]byte(bad)); err == nil {
			t.Errorf("%q: got %+v, want error", bad, r)
		}
	}
}

func FuzzParseInstanceAction(f *testing.F) {
	f.Add([]byte(`{"action": "terminate", "time": "2026-11-29T13:31:21Z"}`))
	f.Add([]byte(`{"action": "stop"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseInstanceAction(b)
		if err != nil {
			if a != (InstanceAction{}) {
				t.Fatalf("%q: error %v with action %+v", b, err, a)
			}
			return
		}
		if a.Time.IsZero() || (a.Action != "terminate" && a.Action != "stop" && a.Action != "hibernate") {
			t.Fatalf("%q: accepted %+v", b, a)
		}
	})
}

func FuzzParseRebalance(f *testing.F) {
	f.Add([]byte(`{"noticeTime": "2026-11-29T13:29:21Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRebalance(b)
		if (err == nil) == r.NoticeTime.IsZero() {
			t.Fatalf("%q: %+v, %v", b, r, err)
		}
	})
}

// fakeIMDS is an IMDSv2 server: PUT /latest/api/token issues a token, every
// GET must carry it (401 otherwise), absent documents are 404.
type fakeIMDS struct {
	srv         *httptest.Server
	mu          sync.Mutex
	docs        map[string]string // path under /latest/meta-data/
	tokens      int
	gets        int
	missingTok  int
	failWith500 bool
}

func newFakeIMDS(t *testing.T) *fakeIMDS {
	f := &fakeIMDS{docs: map[string]string{"instance-id": "i-0123456789abcdef0"}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				http.Error(w, "missing ttl", http.StatusBadRequest)
				return
			}
			f.tokens++
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
			w.Write([]byte("tok-abc"))
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		f.gets++
		if r.Header.Get("X-aws-ec2-metadata-token") != "tok-abc" {
			f.missingTok++
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if f.failWith500 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		doc, ok := f.docs[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(doc))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIMDS) set(path, doc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if doc == "" {
		delete(f.docs, path)
	} else {
		f.docs[path] = doc
	}
}

func TestClientAgainstIMDSv2Server(t *testing.T) {
	f := newFakeIMDS(t)
	c := New(Options{Endpoint: f.srv.URL})
	ctx := context.Background()

	if _, ok, err := c.InstanceAction(ctx); ok || err != nil {
		t.Fatalf("no notice: ok=%v err=%v, want 404 read as none", ok, err)
	}
	if _, ok, err := c.Rebalance(ctx); ok || err != nil {
		t.Fatalf("no rebalance: ok=%v err=%v", ok, err)
	}
	id, err := c.InstanceID(ctx)
	if err != nil || id != "i-0123456789abcdef0" {
		t.Fatalf("instance id = %q, %v", id, err)
	}

	f.set("events/recommendations/rebalance", `{"noticeTime": "2026-11-29T13:29:21Z"}`)
	r, ok, err := c.Rebalance(ctx)
	if err != nil || !ok || !r.NoticeTime.Equal(time.Date(2026, 11, 29, 13, 29, 21, 0, time.UTC)) {
		t.Fatalf("rebalance = %+v %v %v", r, ok, err)
	}
	f.set("spot/instance-action", `{"action": "terminate", "time": "2026-11-29T13:31:21Z"}`)
	a, ok, err := c.InstanceAction(ctx)
	if err != nil || !ok || a.Action != "terminate" || !a.Time.Equal(time.Date(2026, 11, 29, 13, 31, 21, 0, time.UTC)) {
		t.Fatalf("instance action = %+v %v %v", a, ok, err)
	}
	f.set("spot/instance-action", `{"action": "explode"}`)
	if a, ok, err := c.InstanceAction(ctx); ok || err == nil {
		t.Fatalf("garbage notice: %+v ok=%v err=%v, want an error and no action", a, ok, err)
	}
	f.mu.Lock()
	tokens, missing := f.tokens, f.missingTok
	f.mu.Unlock()
	if tokens != 1 || missing != 0 {
		t.Fatalf("token PUTs = %d, GETs without token = %d; want one token reused by every GET", tokens, missing)
	}

	// A failing endpoint costs one attempt per call: no SDK retries.
	f.mu.Lock()
	f.failWith500, f.gets = true, 0
	f.mu.Unlock()
	if _, _, err := c.InstanceAction(ctx); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("500: err = %v", err)
	}
	f.mu.Lock()
	gets := f.gets
	f.mu.Unlock()
	if gets != 1 {
		t.Fatalf("GETs after one failing call = %d, want 1 (no retries)", gets)
	}
}

func TestClientDeadEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c := New(Options{Endpoint: url, Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, ok, err := c.InstanceAction(context.Background())
	if ok || err == nil {
		t.Fatalf("dead endpoint: ok=%v err=%v, want an error", ok, err)
	}
	t.Logf("dead endpoint answered in %v: %v", time.Since(start), err)

	// An endpoint that accepts and never answers (a black hole) costs one
	// attempt bounded by Timeout, not the SDK's retries.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	c = New(Options{Endpoint: "http://" + l.Addr().String(), Timeout: 200 * time.Millisecond})
	start = time.Now()
	if _, ok, err := c.InstanceAction(context.Background()); ok || err == nil {
		t.Fatalf("black hole: ok=%v err=%v, want an error", ok, err)
	}
	t.Logf("black-holed endpoint answered in %v (timeout 200ms)", time.Since(start))
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections to the black hole, want 1 (no retries)", n)
	}
}

func TestPollerHandlesEachNoticeOnce(t *testing.T) {
	f := newFakeIMDS(t)
	var mu sync.Mutex
	var got []Notice
	p := &Poller{Client: New(Options{Endpoint: f.srv.URL}), Interval: 10 * time.Millisecond,
		Handle: func(_ context.Context, n Notice) { mu.Lock(); got = append(got, n); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	giveUp := time.Now().Add(time.Minute) // hang guard only
	guard := func() {
		if time.Now().After(giveUp) {
			t.Fatalf("poller made no progress in a minute; notices so far: %+v", got)
		}
	}
	wait := func(n int) {
		for {
			guard()
			mu.Lock()
			l := len(got)
			mu.Unlock()
			if l >= n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitGets := func(n int) {
		for {
			guard()
			f.mu.Lock()
			g := f.gets
			f.mu.Unlock()
			if g >= n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitGets(6) // several polls with nothing to report
	f.set("events/recommendations/rebalance", `{"noticeTime": "2026-11-29T13:29:21Z"}`)
	wait(1)
	f.set("spot/instance-action", `{"action":"garbage"}`)
	f.mu.Lock()
	base := f.gets
	f.mu.Unlock()
	waitGets(base + 4)
	f.set("spot/instance-action", `{"action": "stop", "time": "2026-11-29T13:31:21Z"}`)
	wait(2)
	// The poller stops polling once it acted on an instance action; give it
	// time to (wrongly) report anything twice.
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Rebalance == nil || got[1].InstanceAction == nil || got[1].InstanceAction.Action != "stop" {
		t.Fatalf("notices = %+v, want one rebalance then one stop", got)
	}
}
