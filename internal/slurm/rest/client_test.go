package rest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// replay is a slurmrestd stand-in for the client's own logic (detection,
// credentials, fallback): it answers with the captured answers of one
// release and records each request. What slurmrestd really does is tested
// against the real daemons (TestClientAgainstSlurm in internal/slurm).
type replay struct {
	t       *testing.T
	rel     string
	serve   map[string]string // "METHOD path" -> fixture
	mu      sync.Mutex
	seen    []string
	headers []http.Header
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path)
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	f, ok := r.serve[req.Method+" "+req.URL.Path]
	if !ok {
		http.Error(w, "Unable to find requested URL", http.StatusNotFound)
		return
	}
	a := fixtureAnswer(r.t, r.rel, f)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	w.Write(a.body)
}

func newReplay(t *testing.T, rel string, serve map[string]string) (*replay, string) {
	r := &replay{t: t, rel: rel, serve: serve}
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	return r, s.URL
}

// verify checks an HS256 token against key with crypto/hmac directly.
func verify(tok string, key []byte) bool {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(tok[:i]))
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	return err == nil && hmac.Equal(sig, mac.Sum(nil))
}

func TestDetectionAndCredentials(t *testing.T) {
	r, url := newReplay(t, "24.11", map[string]string{
		"GET /slurm/v0.0.42/ping/": "rest-ping.json",
		"GET /slurm/v0.0.42/job/6": "rest-job.json",
	})
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	c, err := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	jobs, err := c.Jobs(ctx, 6)
	if err != nil || len(jobs) != 1 || jobs[0].ID != 6 {
		t.Fatalf("Jobs(6) = %+v, %v", jobs, err)
	}
	if _, err := c.Jobs(ctx, 6); err != nil {
		t.Fatal(err)
	}
	want := []string{"GET /slurm/v0.0.45/ping/", "GET /slurm/v0.0.42/ping/", "GET /slurm/v0.0.42/job/6", "GET /slurm/v0.0.42/job/6"}
	if strings.Join(r.seen, ",") != strings.Join(want, ",") {
		t.Errorf("requests %v, want %v (the newest data version first, detected once)", r.seen, want)
	}
	for _, h := range r.headers {
		if h.Get("X-SLURM-USER-NAME") != "slurm" || !verify(h.Get("X-SLURM-USER-TOKEN"), []byte(vectorKey)) {
			t.Errorf("request without a valid token for slurm: %v", h)
		}
	}
	// a second client of the same URL in the process skips the probe
	c2, _ := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key})
	if _, err := c2.Jobs(ctx, 6); err != nil || len(r.seen) != 5 || r.seen[4] != "GET /slurm/v0.0.42/job/6" {
		t.Errorf("second client: %v, requests %v", err, r.seen)
	}
}

func TestNoDataVersion(t *testing.T) {
	_, url := newReplay(t, "24.11", nil)
	c, err := New(Options{URL: url, InsecureLoopback: true, TokenFile: writeSecret(t, "tok", vectorToken, 0o600)})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serves none of the data versions") {
		t.Fatalf("Ping = %v", err)
	}
}

// TestFallback: what the release's REST API lacks goes to the fallback, or
// fails with ErrUnsupported without one; nothing is half done.
func TestFallback(t *testing.T) {
	r, url := newReplay(t, "24.11", map[string]string{"GET /slurm/v0.0.42/ping/": "rest-ping.json"})
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	ctx := context.Background()
	bare, err := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key, DataVersion: "v0.0.42"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Requeue(ctx, 5); !errors.Is(err, slurm.ErrUnsupported) || !strings.Contains(err.Error(), "v0.0.42") {
		t.Errorf("Requeue without a fallback on v0.0.42: %v", err)
	}
	fake := slurmfake.New([]slurm.Job{{ID: 5, State: "RUNNING", Nodes: "gpu-1"}}, nil)
	c, err := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key, DataVersion: "v0.0.42", Fallback: fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Requeue(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if j, _ := fake.Job(5); j.State != "PENDING" {
		t.Errorf("the fallback did not requeue: %+v", j)
	}
	// slurmrestd answers a bounded scan or a node's jobs only with every
	// job: squeue does, through the fallback
	seen := len(r.seen)
	if js, err := c.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}, Max: 10}); err != nil || len(js) != 1 || js[0].ID != 5 {
		t.Errorf("JobStates(Max) through the fallback = %+v, %v", js, err)
	}
	if js, err := c.JobStates(ctx, slurm.JobFilter{Nodes: []string{"gpu-1"}}); err != nil || len(js) != 0 {
		t.Errorf("JobStates(gpu-1) of a requeued job through the fallback = %+v, %v", js, err)
	}
	if len(r.seen) != seen {
		t.Errorf("slurmrestd was asked %v for a bounded or by-node scan with a fallback", r.seen[seen:])
	}
	// 22.05: node updates, a hold with a reason and a batch-only signal
	old, err := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key, DataVersion: "v0.0.38", Fallback: fake})
	if err != nil {
		t.Fatal(err)
	}
	before := len(r.seen)
	if err := old.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"gpu-1"}, State: "DRAIN", Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := old.Hold(ctx, 5, "burst: why"); err != nil {
		t.Fatal(err)
	}
	if err := old.Signal(ctx, 5, "USR1", true); err != nil {
		t.Fatal(err)
	}
	if len(r.seen) != before {
		t.Errorf("slurmrestd was asked %v for what v0.0.38 cannot do", r.seen[before:])
	}
	calls := strings.Join(fake.Calls(), "\n")
	for _, w := range []string{"update gpu-1 DRAIN x", "hold 5 burst: why", "signal 5 USR1 batch"} {
		if !strings.Contains(calls, w) {
			t.Errorf("fallback calls %q lack %q", calls, w)
		}
	}
	bare22, _ := New(Options{URL: url, InsecureLoopback: true, User: "slurm", JWTKeyFile: key, DataVersion: "v0.0.38"})
	if err := bare22.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"gpu-1"}, Comment: "x"}); !errors.Is(err, slurm.ErrUnsupported) {
		t.Errorf("UpdateNodes on v0.0.38 without a fallback: %v", err)
	}
}

func TestUnixSocket(t *testing.T) {
	r := &replay{t: t, rel: "26.05", serve: map[string]string{"GET /slurm/v0.0.45/ping/": "rest-ping.json"}}
	sock := filepath.Join(t.TempDir(), "slurmrestd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := New(Options{URL: "unix:" + sock, TokenFile: writeSecret(t, "tok", "SLURM_JWT="+vectorToken, 0o600)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.headers[0].Get("X-SLURM-USER-NAME") != "slurm" || r.headers[0].Get("X-SLURM-USER-TOKEN") != vectorToken {
		t.Errorf("token file credentials not sent: %v", r.headers[0])
	}
}

func TestOptionsRefused(t *testing.T) {
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	tok := writeSecret(t, "tok", vectorToken, 0o600)
	for _, o := range []Options{
		{URL: "ftp://x", User: "slurm", JWTKeyFile: key},
		{URL: "http://h:1/slurm", User: "slurm", JWTKeyFile: key},
		{URL: "unix:relative.sock", User: "slurm", JWTKeyFile: key},
		{URL: "unix:/run/x.sock", User: "slurm"},
		{URL: "unix:/run/x.sock", User: "slurm", JWTKeyFile: key, TokenFile: tok},
		{URL: "unix:/run/x.sock", User: "slurm", JWTKeyFile: key, DataVersion: "v0.0.41"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
