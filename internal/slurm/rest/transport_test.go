package rest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsReplay is the replay stand-in behind TLS with a certificate of its
// own (a fresh self-signed CA certificate for 127.0.0.1, as a site's
// slurmrestd would have), and the PEM file of that certificate.
func tlsReplay(t *testing.T) (*replay, string, string) {
	r := &replay{t: t, rel: "24.11", serve: map[string]string{"GET /slurm/v0.0.42/ping/": "rest-ping.json"}}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "slurmrestd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(r)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	ca := filepath.Join(t.TempDir(), "slurmrestd-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return r, s.URL, ca
}

// TestHTTPSVerifiesSlurmrestd: over https the client trusts the CA file
// and nothing else; a server whose certificate another CA signed (an
// impostor on the path) gets no request, so never sees the token.
func TestHTTPSVerifiesSlurmrestd(t *testing.T) {
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	r, url, ca := tlsReplay(t)
	c, err := New(Options{URL: url, CAFile: ca, User: "slurm", JWTKeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping over https with the right CA: %v", err)
	}
	if len(r.headers) == 0 || !verify(r.headers[0].Get("X-SLURM-USER-TOKEN"), []byte(vectorKey)) {
		t.Fatalf("token not sent over TLS: %v", r.headers)
	}

	impostor, impURL, _ := tlsReplay(t)
	c2, err := New(Options{URL: impURL, CAFile: ca, User: "slurm", JWTKeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	err = c2.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("impostor with another CA's certificate: %v, want a certificate error", err)
	}
	impostor.mu.Lock()
	defer impostor.mu.Unlock()
	if len(impostor.seen) != 0 {
		t.Errorf("the impostor got requests: %v", impostor.seen)
	}
}

// TestPlainHTTPRefused: no request with a token goes out in clear text
// except to a loopback IP the admin marked insecure.
func TestPlainHTTPRefused(t *testing.T) {
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	_, tlsURL, _ := tlsReplay(t)
	garbage := writeSecret(t, "ca.pem", "not a certificate", 0o644)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{URL: "http://10.0.0.10:6820"}, "in clear text across the network"},
		{Options{URL: "http://10.0.0.10:6820", InsecureLoopback: true}, "in clear text across the network"},
		{Options{URL: "http://localhost:6820", InsecureLoopback: true}, "in clear text across the network"},
		{Options{URL: "http://127.0.0.1:6820"}, "needs insecure_loopback"},
		{Options{URL: tlsURL}, "https needs the CA file"},
		{Options{URL: tlsURL, CAFile: garbage}, "no PEM CERTIFICATE block"},
		{Options{URL: tlsURL, CAFile: filepath.Join(t.TempDir(), "none.pem")}, "reading slurmrestd's CA file"},
	} {
		tc.o.User, tc.o.JWTKeyFile = "slurm", key
		_, err := New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s, ca %q, insecure %v): %v, want %q", tc.o.URL, tc.o.CAFile, tc.o.InsecureLoopback, err, tc.want)
		}
	}
	for _, u := range []string{"http://127.0.0.1:6820", "http://[::1]:6820"} {
		if _, err := New(Options{URL: u, InsecureLoopback: true, User: "slurm", JWTKeyFile: key}); err != nil {
			t.Errorf("%s with insecure_loopback: %v", u, err)
		}
	}
}
