package moto_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// ec2Call is one EC2 query-protocol request that passed the recorder, with
// the status moto answered.
type ec2Call struct {
	Action string
	Params url.Values
	Status int
}

// recorder is a reverse proxy in front of moto that notes each EC2 call
// burst's SDK client makes through it (the Host header is kept, so the
// SigV4 signature moto checks still holds). It shows what burst asked for
// where moto's own state cannot: a call moto failed.
type recorder struct {
	URL   string
	mu    sync.Mutex
	calls []ec2Call
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(sw, req)
		r.mu.Lock()
		r.calls = append(r.calls, ec2Call{Action: form.Get("Action"), Params: form, Status: sw.status})
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Calls returns the calls of one action, in order.
func (r *recorder) Calls(action string) []ec2Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ec2Call
	for _, c := range r.calls {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

// InstanceIDs lists a call's InstanceId.N parameters.
func (c ec2Call) InstanceIDs() []string {
	var ids []string
	for k, v := range c.Params {
		if strings.HasPrefix(k, "InstanceId.") {
			ids = append(ids, v...)
		}
	}
	return ids
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
