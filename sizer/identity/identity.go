// Package identity verifies EC2 instance identity documents, the proof a
// burst node presents to burst-sizer to obtain its credential: the plain
// JSON document (IMDS /latest/dynamic/instance-identity/document) with
// either its rsa2048 PKCS #7 signature (…/rsa2048, the document attached)
// or its RSA signature (…/signature, PKCS #1 v1.5 over SHA-256 of the
// document), checked against the region's AWS certificate (EC2 User Guide,
// "Verify the instance identity document"; the EC2 emulator signs with its
// own key, configured the same way). Pure: no network, no clock.
package identity

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/smallstep/pkcs7"
)

// Signature kinds, as named by their IMDS endpoints.
const (
	KindRSA2048   = "rsa2048"
	KindSignature = "signature"
)

// MaxDocument bounds a document (EC2's are about 500 bytes).
const MaxDocument = 4096

// maxSignature bounds a base64 signature or PKCS #7 message.
const maxSignature = 16384

// Document is the part of an instance identity document burst checks.
type Document struct {
	AccountID        string    `json:"accountId"`
	Architecture     string    `json:"architecture"`
	AvailabilityZone string    `json:"availabilityZone"`
	ImageID          string    `json:"imageId"`
	InstanceID       string    `json:"instanceId"`
	InstanceType     string    `json:"instanceType"`
	PendingTime      time.Time `json:"pendingTime"`
	PrivateIP        string    `json:"privateIp"`
	Region           string    `json:"region"`
	Version          string    `json:"version"`
}

var (
	instanceRE = regexp.MustCompile(`^i-[0-9a-f]{8,32}$`)
	accountRE  = regexp.MustCompile(`^[0-9]{12}$`)
	regionRE   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]$`)
	typeRE     = regexp.MustCompile(`^[a-z0-9-]+\.[a-z0-9-]+$`)
)

// ParseDocument parses a document and checks the fields burst relies on.
// Fields burst does not read are ignored (AWS adds fields over time).
func ParseDocument(b []byte) (Document, error) {
	var d Document
	if len(b) > MaxDocument {
		return d, fmt.Errorf("identity document: %d bytes, at most %d", len(b), MaxDocument)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("identity document: %w", err)
	}
	if dec.More() {
		return Document{}, errors.New("identity document: trailing data after the JSON object")
	}
	var probs []string
	if !instanceRE.MatchString(d.InstanceID) {
		probs = append(probs, fmt.Sprintf("instanceId %q", d.InstanceID))
	}
	if !accountRE.MatchString(d.AccountID) {
		probs = append(probs, fmt.Sprintf("accountId %q", d.AccountID))
	}
	if !regionRE.MatchString(d.Region) {
		probs = append(probs, fmt.Sprintf("region %q", d.Region))
	}
	if !strings.HasPrefix(d.AvailabilityZone, d.Region) || len(d.AvailabilityZone) > len(d.Region)+16 || len(d.AvailabilityZone) == len(d.Region) {
		probs = append(probs, fmt.Sprintf("availabilityZone %q (not in region %q)", d.AvailabilityZone, d.Region))
	}
	if !typeRE.MatchString(d.InstanceType) {
		probs = append(probs, fmt.Sprintf("instanceType %q", d.InstanceType))
	}
	if len(probs) > 0 {
		return Document{}, fmt.Errorf("identity document: bad %s", strings.Join(probs, ", "))
	}
	return d, nil
}

// ParseCertificates reads every CERTIFICATE block of a PEM file (the AWS
// regional certificate(s), or the emulator's); at least one is required and
// each must carry an RSA key.
func ParseCertificates(pemBytes []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := pemBytes
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity certificate: %w", err)
		}
		if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("identity certificate %q: not an RSA key (use the region's RSA-2048 or RSA certificate)", c.Subject.CommonName)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("identity certificate: no PEM CERTIFICATE block")
	}
	return out, nil
}

// ErrBadSignature means no configured certificate verifies the signature.
var ErrBadSignature = errors.New("the identity signature does not verify with the configured certificate")

// decode64 reads base64 with the line breaks IMDS puts in.
func decode64(s string) ([]byte, error) {
	if len(s) > maxSignature {
		return nil, fmt.Errorf("%d bytes of base64, at most %d", len(s), maxSignature)
	}
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	return base64.StdEncoding.DecodeString(s)
}

// VerifySignature checks the "signature" form: base64 PKCS #1 v1.5 over the
// SHA-256 of doc, by one of certs.
func VerifySignature(doc []byte, sig64 string, certs []*x509.Certificate) error {
	sig, err := decode64(sig64)
	if err != nil {
		return fmt.Errorf("identity signature: %w", err)
	}
	h := sha256.Sum256(doc)
	for _, c := range certs {
		if pk, ok := c.PublicKey.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(pk, crypto.SHA256, h[:], sig) == nil {
			return nil
		}
	}
	return ErrBadSignature
}

// VerifyPKCS7 checks the rsa2048 form (base64 signed-data, PEM armour
// optional; AWS sends BER with indefinite lengths, which
// github.com/smallstep/pkcs7 reads) with one of certs (the message carries
// none: the signer is found by issuer and serial among certs) and returns
// the document it carries. The signer must use SHA-256 with RSA.
func VerifyPKCS7(msg64 string, certs []*x509.Certificate) ([]byte, error) {
	s := strings.TrimSpace(msg64)
	s = strings.TrimPrefix(s, "-----BEGIN PKCS7-----")
	s = strings.TrimSuffix(s, "-----END PKCS7-----")
	der, err := decode64(s)
	if err != nil {
		return nil, fmt.Errorf("rsa2048 signature: %w", err)
	}
	p7, err := pkcs7.Parse(der)
	if err != nil {
		return nil, fmt.Errorf("rsa2048 signature: %w", err)
	}
	if len(p7.Signers) != 1 {
		return nil, fmt.Errorf("rsa2048 signature: %d signers, want 1", len(p7.Signers))
	}
	if alg := p7.Signers[0].DigestAlgorithm.Algorithm; !alg.Equal(oidSHA256) {
		return nil, fmt.Errorf("rsa2048 signature: digest %v, want SHA-256", alg)
	}
	if len(p7.Content) == 0 {
		return nil, errors.New("rsa2048 signature: no attached content (the document)")
	}
	// only the configured certificates, never one the message brings
	p7.Certificates = certs
	if err := p7.Verify(); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrBadSignature, err)
	}
	return p7.Content, nil
}

var oidSHA256 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
