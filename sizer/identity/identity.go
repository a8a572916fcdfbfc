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
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
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

// PKCS #7 (RFC 2315) signed-data, read from the RFC: the subset EC2's
// rsa2048 signature uses (one signer, SHA-256, RSA, content attached,
// authenticated attributes optional).
var (
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidSHA256        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSA           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidSHA256WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	oidContentType   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
)

type contentInfo struct {
	Type    asn1.ObjectIdentifier
	Content asn1.RawValue `asn1:"explicit,optional,tag:0"`
}

type signerInfo struct {
	Version         int
	IssuerAndSerial asn1.RawValue
	DigestAlg       pkix.AlgorithmIdentifier
	AuthAttrs       asn1.RawValue `asn1:"optional,tag:0"`
	SigAlg          pkix.AlgorithmIdentifier
	Signature       []byte
	UnauthAttrs     asn1.RawValue `asn1:"optional,tag:1"`
}

type signedData struct {
	Version     int
	DigestAlgs  asn1.RawValue
	Content     contentInfo
	Certs       asn1.RawValue `asn1:"optional,tag:0"`
	CRLs        asn1.RawValue `asn1:"optional,tag:1"`
	SignerInfos []signerInfo  `asn1:"set"`
}

type attribute struct {
	Type   asn1.ObjectIdentifier
	Values asn1.RawValue
}

// VerifyPKCS7 checks the rsa2048 form (base64 DER signed-data, PEM armour
// optional) with one of certs and returns the document it carries.
func VerifyPKCS7(msg64 string, certs []*x509.Certificate) ([]byte, error) {
	s := strings.TrimSpace(msg64)
	s = strings.TrimPrefix(s, "-----BEGIN PKCS7-----")
	s = strings.TrimSuffix(s, "-----END PKCS7-----")
	der, err := decode64(s)
	if err != nil {
		return nil, fmt.Errorf("rsa2048 signature: %w", err)
	}
	content, signed, sig, err := parsePKCS7(der)
	if err != nil {
		return nil, fmt.Errorf("rsa2048 signature: %w", err)
	}
	h := sha256.Sum256(signed)
	for _, c := range certs {
		if pk, ok := c.PublicKey.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(pk, crypto.SHA256, h[:], sig) == nil {
			return content, nil
		}
	}
	return nil, ErrBadSignature
}

// parsePKCS7 returns the attached content, the bytes the signature covers
// and the signature.
func parsePKCS7(der []byte) (content, signed, sig []byte, err error) {
	var ci contentInfo
	rest, err := asn1.Unmarshal(der, &ci)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("not DER: %w", err)
	}
	if len(rest) > 0 {
		return nil, nil, nil, errors.New("trailing data after the message")
	}
	if !ci.Type.Equal(oidSignedData) {
		return nil, nil, nil, fmt.Errorf("content type %v, want signed-data", ci.Type)
	}
	var sd signedData
	if rest, err = asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil || len(rest) > 0 {
		return nil, nil, nil, fmt.Errorf("signed-data: %v", err)
	}
	if !sd.Content.Type.Equal(oidData) || len(sd.Content.Content.Bytes) == 0 {
		return nil, nil, nil, errors.New("no attached data content (the document)")
	}
	if rest, err = asn1.Unmarshal(sd.Content.Content.Bytes, &content); err != nil || len(rest) > 0 {
		return nil, nil, nil, fmt.Errorf("content is not an OCTET STRING: %v", err)
	}
	if len(sd.SignerInfos) != 1 {
		return nil, nil, nil, fmt.Errorf("%d signers, want 1", len(sd.SignerInfos))
	}
	si := sd.SignerInfos[0]
	if !si.DigestAlg.Algorithm.Equal(oidSHA256) {
		return nil, nil, nil, fmt.Errorf("digest %v, want SHA-256", si.DigestAlg.Algorithm)
	}
	if !si.SigAlg.Algorithm.Equal(oidRSA) && !si.SigAlg.Algorithm.Equal(oidSHA256WithRSA) {
		return nil, nil, nil, fmt.Errorf("signature algorithm %v, want RSA", si.SigAlg.Algorithm)
	}
	if len(si.AuthAttrs.FullBytes) == 0 {
		return content, content, si.Signature, nil // signature over the content itself
	}
	// With authenticated attributes the signature covers their DER
	// encoding as a SET OF (tag 0x31, not the [0] IMPLICIT tag), and the
	// messageDigest attribute must be the content's digest.
	var digest []byte
	var typeOK bool
	attrs := si.AuthAttrs.Bytes
	for len(attrs) > 0 {
		var a attribute
		if attrs, err = asn1.Unmarshal(attrs, &a); err != nil {
			return nil, nil, nil, fmt.Errorf("authenticated attribute: %w", err)
		}
		switch {
		case a.Type.Equal(oidMessageDigest):
			if _, err := asn1.Unmarshal(a.Values.Bytes, &digest); err != nil {
				return nil, nil, nil, fmt.Errorf("messageDigest: %w", err)
			}
		case a.Type.Equal(oidContentType):
			var t asn1.ObjectIdentifier
			if _, err := asn1.Unmarshal(a.Values.Bytes, &t); err == nil && t.Equal(oidData) {
				typeOK = true
			}
		}
	}
	want := sha256.Sum256(content)
	if !typeOK || !bytes.Equal(digest, want[:]) {
		return nil, nil, nil, errors.New("authenticated attributes do not name the document's digest")
	}
	set, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: si.AuthAttrs.Bytes})
	if err != nil {
		return nil, nil, nil, err
	}
	return content, set, si.Signature, nil
}
