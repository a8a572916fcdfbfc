package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/sizer/tlsca"
)

// TestHTTPSOnly: the API answers TLS only (a plain-HTTP request gets a 400
// and reaches no handler), a client pinning another CA refuses the server,
// and a client refuses an http:// URL outright.
func TestHTTPSOnly(t *testing.T) {
	f := start(t, nil)
	before := f.dump(t)
	addr := strings.TrimPrefix(f.url, "https://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"action":"terminate","time":"2100-01-01T00:00:00Z","instance_id":"i-0123456789abcdef0"}`
	fmt.Fprintf(conn, "POST /v1/interruptions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, f.token, len(body), body)
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("plain HTTP: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	conn.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(msg), "HTTPS") {
		t.Errorf("plain HTTP to the API: %d %q, want 400 from the TLS listener", resp.StatusCode, msg)
	}
	sameStore(t, "a plain-HTTP request with the admin token", before, f.dump(t))

	// a client pinning another CA: the handshake fails, nothing is sent
	other := filepath.Join(t.TempDir(), "tls")
	p := tlsca.Paths{CAFile: filepath.Join(other, "ca.pem"), CAKey: filepath.Join(other, "ca.key"), CertFile: filepath.Join(other, "s.pem"), KeyFile: filepath.Join(other, "s.key")}
	if _, err := tlsca.Init(tlsca.Options{Paths: p, Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	wrong, err := sizerclient.New(f.url, f.token, sizerclient.WithCAFile(p.CAFile), sizerclient.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Budgets(context.Background())
	if !errors.Is(err, sizerclient.ErrUntrusted) {
		t.Errorf("client pinning another CA: %v, want ErrUntrusted", err)
	}
	// system roots do not vouch for the sizer either
	if _, err := http.Get(f.url + "/healthz"); err == nil {
		t.Error("a client trusting the system roots reached the sizer")
	}
	if _, err := sizerclient.New(strings.Replace(f.url, "https", "http", 1), f.token, sizerclient.WithCAFile(f.caFile)); err == nil {
		t.Error("sizerclient accepted an http:// URL")
	}
	if _, err := sizerclient.New(f.url, f.token); err == nil {
		t.Error("sizerclient made a client without a CA to pin")
	}
}

// TestListenAndServeTLSAndLoopbackMetrics: the daemon refuses to start
// without a certificate, serves HTTPS on sizer.listen and, when set,
// /metrics alone in plain HTTP on a loopback address (and only there).
func TestListenAndServeTLSAndLoopbackMetrics(t *testing.T) {
	f := start(t, nil)
	free := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}
	dir := t.TempDir()
	noTLS, err := New(context.Background(), Options{Token: f.token, StateDir: dir, Classes: testClasses(), Region: "us-east-1", Listen: free()})
	if err != nil {
		t.Fatal(err)
	}
	if err := noTLS.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "tls init") {
		t.Errorf("serving without a certificate: %v", err)
	}
	api, metrics := free(), free()
	s, err := New(context.Background(), Options{Token: f.token, StateDir: t.TempDir(), Classes: testClasses(), Region: "us-east-1",
		TLSCertFile: f.srv.o.TLSCertFile, TLSKeyFile: f.srv.o.TLSKeyFile, Listen: api, MetricsListen: metrics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx) }()
	defer func() { cancel(); <-done }()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		if resp, err = http.Get("http://" + metrics + "/metrics"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("loopback metrics: %v %v", resp, err)
	}
	resp.Body.Close()
	if r, err := http.Get("http://" + metrics + sizerapi.PathBudgets); err == nil && r.StatusCode == 200 {
		t.Error("the plain-HTTP metrics listener serves the API")
	}
	c, _ := sizerclient.New("https://"+api, f.token, sizerclient.WithCAFile(f.caFile))
	if _, err := c.Budgets(ctx); err != nil {
		t.Errorf("HTTPS API: %v", err)
	}
	bad, err := New(context.Background(), Options{Token: f.token, StateDir: t.TempDir(), Classes: testClasses(), Region: "us-east-1",
		TLSCertFile: f.srv.o.TLSCertFile, TLSKeyFile: f.srv.o.TLSKeyFile, Listen: free(), MetricsListen: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("plain-HTTP metrics on 0.0.0.0: %v", err)
	}
}
