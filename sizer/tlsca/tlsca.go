// Package tlsca makes burst-sizer's own TLS material (`burst-sizer tls
// init`): a CA (ECDSA P-256, 10 years) whose certificate every client pins,
// and a server certificate it signs (2 years) for the host names and
// addresses clients use. Keys are written 0600, certificates 0644; the CA
// key stays beside the server key in the state directory so that `tls init
// --renew` can reissue the server certificate without re-pinning clients.
package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/statefile"
)

// Paths are where the material goes.
type Paths struct {
	CAFile   string // CA certificate, public (clients pin it)
	CAKey    string // CA key, 0600
	CertFile string // server certificate
	KeyFile  string // server key, 0600
}

// Options for Init.
type Options struct {
	Paths
	// Hosts are the server certificate's names: DNS names and IP addresses.
	Hosts []string
	// Force replaces existing material (new CA: every client must re-pin).
	Force bool
	// Renew reissues the server certificate with the existing CA.
	Renew bool
	// Cluster names the CA's subject.
	Cluster string
	Now     func() time.Time
}

// Result says what Init wrote.
type Result struct {
	Wrote []string
	Hosts []string
}

// newCA makes a new CA and writes its key and certificate (o.CAKey,
// o.CAFile).
func newCA(o Options, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls init: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "burst-sizer CA " + o.Cluster, Organization: []string{"burst"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls init: making the CA: %w", err)
	}
	caCert, _ := x509.ParseCertificate(der)
	if err := writeKey(o.CAKey, key); err != nil {
		return nil, nil, err
	}
	if err := writeCert(o.CAFile, der); err != nil {
		return nil, nil, err
	}
	return caCert, key, nil
}

// Init creates the CA (unless Renew) and the server certificate.
func Init(o Options) (Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(o.Hosts) == 0 {
		return Result{}, errors.New("tls init: no host names or addresses for the server certificate (sizer.tls.hosts, or the host of sizer.url)")
	}
	for _, p := range []string{o.CAFile, o.CAKey, o.CertFile, o.KeyFile} {
		if !filepath.IsAbs(p) {
			return Result{}, fmt.Errorf("tls init: path %q is not absolute", p)
		}
	}
	var res Result
	now := o.Now()
	var caCert *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if o.Renew {
		var err error
		if caCert, caKey, err = loadCA(o.CAFile, o.CAKey); err != nil {
			return res, fmt.Errorf("tls init --renew: %w", err)
		}
	} else {
		if !o.Force {
			for _, p := range []string{o.CAFile, o.CAKey, o.CertFile, o.KeyFile} {
				if _, err := os.Stat(p); err == nil {
					return res, fmt.Errorf("tls init: %s exists; --renew reissues the server certificate with the same CA, --force makes a new CA (every client then needs the new %s)", p, o.CAFile)
				}
			}
		}
		var err error
		if caCert, caKey, err = newCA(o, now); err != nil {
			return res, err
		}
		res.Wrote = append(res.Wrote, o.CAKey, o.CAFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return res, fmt.Errorf("tls init: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: o.Hosts[0], Organization: []string{"burst"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return res, fmt.Errorf("tls init: making the server certificate: %w", err)
	}
	if err := writeKey(o.KeyFile, key); err != nil {
		return res, err
	}
	if err := writeCert(o.CertFile, der); err != nil {
		return res, err
	}
	res.Wrote = append(res.Wrote, o.KeyFile, o.CertFile)
	res.Hosts = o.Hosts
	return res, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("tls init: %w", err)
	}
	if err := statefile.WriteAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("tls init: writing %s: %w", path, err)
	}
	return nil
}

func writeCert(path string, der []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tls init: %w", err)
	}
	if err := statefile.WriteAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("tls init: writing %s: %w", path, err)
	}
	return nil
}

func loadCA(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || !ek.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s is not the key of %s", keyFile, certFile)
	}
	return cert, ek, nil
}
