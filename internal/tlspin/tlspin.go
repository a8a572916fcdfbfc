// Package tlspin is how burst's clients of burst-sizer (burst-resume,
// burst-suspend, burst-sizer route in cli_filter, burst-agent and the node
// bootstrap) trust the sizer: they pin its CA, the certificate
// `burst-sizer tls init` made (or the admin's own), and trust nothing else:
// not the system roots, never plain HTTP. The CA certificate is public (it
// may go into user data); its key never leaves the head node.
package tlspin

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// MaxCAFile bounds a CA file (a few certificates).
const MaxCAFile = 64 << 10

// ParseCA reads the CA certificates of a PEM file; at least one, each a CA.
func ParseCA(pemBytes []byte) ([]*x509.Certificate, error) {
	if len(pemBytes) > MaxCAFile {
		return nil, fmt.Errorf("sizer CA: %d bytes, at most %d", len(pemBytes), MaxCAFile)
	}
	var out []*x509.Certificate
	rest := pemBytes
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("sizer CA: a %q PEM block; the CA file holds certificates only (never a key)", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sizer CA: %w", err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("sizer CA: certificate %q is not a CA certificate", c.Subject.CommonName)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("sizer CA: no PEM CERTIFICATE block (create one with `burst-sizer tls init`)")
	}
	return out, nil
}

// Fingerprint is the SHA-256 of a certificate's DER, in hex (for logs and
// for an admin comparing what a node pins).
func Fingerprint(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return hex.EncodeToString(s[:])
}

// ClientConfig trusts exactly the CAs of caPEM, TLS 1.2 or later.
func ClientConfig(caPEM []byte) (*tls.Config, error) {
	cas, err := ParseCA(caPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// LoadClientConfig is ClientConfig of the file at path.
func LoadClientConfig(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sizer CA (sizer.tls.ca_file): %w; `burst-sizer tls init` writes it", err)
	}
	c, err := ClientConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// HTTPClient is an HTTP client that talks only HTTPS to a server whose
// certificate chains to caPEM, with a whole-request timeout.
func HTTPClient(caPEM []byte, timeout time.Duration) (*http.Client, error) {
	tc, err := ClientConfig(caPEM)
	if err != nil {
		return nil, err
	}
	return httpClient(tc, timeout), nil
}

// LoadHTTPClient is HTTPClient of the CA file at path.
func LoadHTTPClient(path string, timeout time.Duration) (*http.Client, error) {
	tc, err := LoadClientConfig(path)
	if err != nil {
		return nil, err
	}
	return httpClient(tc, timeout), nil
}

func httpClient(tc *tls.Config, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.Proxy = nil // the sizer is on the cluster network: never through a proxy
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
