package tlspin

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config/configtest"
)

func TestPinnedClient(t *testing.T) {
	dir := t.TempDir()
	ca := configtest.WriteCA(t, filepath.Join(dir, "ca.pem"))
	other := configtest.WriteCA(t, filepath.Join(dir, "other.pem"))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.TLS = ca.ServerConfig(t)
	srv.StartTLS()
	defer srv.Close()
	good, err := LoadHTTPClient(filepath.Join(dir, "ca.pem"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := good.Get(srv.URL); err != nil || resp.StatusCode != 200 {
		t.Fatalf("pinned CA: %v %v", resp, err)
	}
	bad, _ := HTTPClient(other.PEM, 5*time.Second)
	if _, err := bad.Get(srv.URL); err == nil {
		t.Fatal("a client pinning another CA accepted the server")
	}
	if len(Fingerprint(ca.Cert)) != 64 {
		t.Error("fingerprint is not SHA-256 hex")
	}
}

func TestParseCARefuses(t *testing.T) {
	dir := t.TempDir()
	ca := configtest.WriteCA(t, filepath.Join(dir, "ca.pem"))
	for name, b := range map[string][]byte{
		"empty":   nil,
		"key":     append(append([]byte{}, ca.PEM...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})...),
		"garbage": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("nope")}),
		"huge":    []byte(strings.Repeat("a", MaxCAFile+1)),
	} {
		if _, err := ParseCA(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadClientConfig(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "tls init") {
		t.Errorf("missing CA file: %v", err)
	}
}

// FuzzParseCA: the CA file every client and node reads (user data carries
// it) never panics the parser, and an accepted file holds CA certificates
// only.
func FuzzParseCA(f *testing.F) {
	ca := configtest.WriteCA(f, filepath.Join(f.TempDir(), "ca.pem"))
	f.Add(ca.PEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseCA(b)
		if err != nil {
			return
		}
		for _, c := range cs {
			if !c.IsCA {
				t.Fatalf("accepted a non-CA certificate %q", c.Subject)
			}
		}
	})
}
