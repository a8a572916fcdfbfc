package configtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
)

// CA is a test CA whose certificate is at the configuration's
// sizer.tls.ca_file (as `burst-sizer tls init` would write it).
type CA struct {
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

// WriteCA makes a CA and writes its certificate to path.
func WriteCA(t testing.TB, path string) *CA {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "burst test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: c, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: k}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// ServerConfig is a TLS server configuration with a certificate for
// 127.0.0.1 signed by the CA.
func (ca *CA) ServerConfig(t testing.TB) *tls.Config {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: k}}, MinVersion: tls.VersionTLS12}
}

// Server is an httptest HTTPS server whose certificate chains to the
// configuration's CA (a stand-in sizer for unit tests); closed when the
// test ends.
func Server(t testing.TB, cfg *config.Config, h http.Handler) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile(cfg.Sizer.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ca := caOf(t, cfg, b)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = ca.ServerConfig(t)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

var cas = map[string]*CA{}

func caOf(t testing.TB, cfg *config.Config, pemBytes []byte) *CA {
	t.Helper()
	casMu.Lock()
	defer casMu.Unlock()
	if ca, ok := cas[string(pemBytes)]; ok {
		return ca
	}
	t.Fatalf("configtest: %s was not written by configtest.Demo", cfg.Sizer.TLS.CAFile)
	return nil
}
