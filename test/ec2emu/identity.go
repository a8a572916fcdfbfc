package ec2emu

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The instance identity document and its signatures, as IMDS serves them
// under /latest/dynamic/instance-identity/ (EC2 User Guide, "Instance
// identity documents" and "Verify the instance identity document"):
//
//   - document: the plain-text JSON document.
//   - signature: base64 of an RSA (PKCS #1 v1.5) signature of the SHA-256
//     hash of the document; verified with the region's "RSA" certificate
//     (openssl dgst -sha256 -verify key -signature sig document).
//   - rsa2048: a PKCS #7 signed-data message (base64 BER with indefinite
//     lengths, as AWS serves it, no PEM armour)
//     with the document attached, SHA-256 with an RSA-2048 key, no
//     certificates inside; verified with the region's "RSA-2048"
//     certificate (openssl smime -verify -inform PEM -certfile cert
//     -noverify after adding the BEGIN/END PKCS7 lines).
//
// The emulator signs with its own keys: one for "signature" and one for
// "rsa2048", as AWS publishes a distinct certificate for each, and
// IdentityCertPEM gives the certificate a verifier is configured with,
// where with AWS it would paste the published regional one. The pkcs7
// endpoint (DSA with SHA-1) is not served: Go's crypto/x509 neither makes
// nor verifies DSA certificates, and rsa2048 supersedes it.

// Identity signature kinds, the names of their IMDS endpoints.
const (
	IdentityRSA2048   = "rsa2048"   // PKCS #7, SHA-256, RSA-2048
	IdentitySignature = "signature" // base64 PKCS #1 v1.5 SHA-256
)

type signer struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

type identity struct {
	once    sync.Once
	err     error
	rsa2048 signer
	rsa     signer
}

// keys makes (once) the two signing keys and their self-signed certificates.
func (s *Server) keys() (*identity, error) {
	id := &s.identity
	id.once.Do(func() {
		for i, sg := range []*signer{&id.rsa2048, &id.rsa} {
			what := []string{"RSA-2048", "RSA"}[i]
			if id.err = makeSigner(sg, fmt.Sprintf("burst EC2 emulator %s instance identity %s", s.opts.Region, what), s.start); id.err != nil {
				return
			}
		}
	})
	return id, id.err
}

func makeSigner(sg *signer, cn string, now time.Time) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the identity signing key: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"burst test"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(20, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("making the identity certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	*sg = signer{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	return nil
}

// IdentityCertPEM returns the certificate that verifies the rsa2048
// signatures (the emulator's stand-in for AWS's regional RSA-2048
// certificate), PEM-encoded. It panics only if key generation fails.
func (s *Server) IdentityCertPEM() []byte {
	b, err := s.IdentityCertPEMFor(IdentityRSA2048)
	if err != nil {
		panic(err)
	}
	return b
}

// IdentityCertPEMFor returns the certificate of one signature kind
// (IdentityRSA2048 or IdentitySignature).
func (s *Server) IdentityCertPEMFor(kind string) ([]byte, error) {
	id, err := s.keys()
	if err != nil {
		return nil, err
	}
	switch kind {
	case IdentityRSA2048:
		return append([]byte(nil), id.rsa2048.pem...), nil
	case IdentitySignature:
		return append([]byte(nil), id.rsa.pem...), nil
	}
	return nil, fmt.Errorf("identity certificate %q: want %q or %q", kind, IdentityRSA2048, IdentitySignature)
}

var armFamily = regexp.MustCompile(`^[a-z]+[0-9]+g[a-z]*$`) // g5g, c7gn: Graviton

// architecture is x86_64, or arm64 for Graviton families.
func (s *Server) architecture(typ string) string {
	if t, ok := s.opts.Catalog.Lookup(typ); ok && armFamily.MatchString(t.Family) {
		return "arm64"
	}
	return "x86_64"
}

// identityDocument renders the instance's document as IMDS does: pretty
// JSON with EC2's field order and `"key" : value` spacing; s.mu held.
func (s *Server) identityDocument(in *instance) []byte {
	arch := s.architecture(in.InstanceType)
	str := strconv.Quote
	fields := [][2]string{
		{"accountId", str(s.opts.Account)},
		{"architecture", str(arch)},
		{"availabilityZone", str(in.Zone)},
		{"billingProducts", "null"},
		{"devpayProductCodes", "null"},
		{"marketplaceProductCodes", "null"},
		{"imageId", str(in.ImageID)},
		{"instanceId", str(in.ID)},
		{"instanceType", str(in.InstanceType)},
		{"kernelId", "null"},
		{"pendingTime", str(in.LaunchTime.UTC().Format("2006-01-02T15:04:05Z"))},
		{"privateIp", str(in.PrivateIP)},
		{"ramdiskId", "null"},
		{"region", str(s.opts.Region)},
		{"version", str("2017-09-30")},
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fields {
		fmt.Fprintf(&b, "  %q : %s", f[0], f[1])
		if i < len(fields)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.Bytes()
}

// identitySignature serves signature or rsa2048 for a document.
func (s *Server) identitySignature(kind string, doc []byte) ([]byte, error) {
	id, err := s.keys()
	if err != nil {
		return nil, err
	}
	switch kind {
	case IdentitySignature:
		h := sha256.Sum256(doc)
		sig, err := rsa.SignPKCS1v15(rand.Reader, id.rsa.key, crypto.SHA256, h[:])
		if err != nil {
			return nil, err
		}
		return wrap64(base64.StdEncoding.EncodeToString(sig)), nil
	case IdentityRSA2048:
		der, err := pkcs7Sign(doc, &id.rsa2048, s.Now())
		if err != nil {
			return nil, err
		}
		return wrap64(base64.StdEncoding.EncodeToString(der)), nil
	}
	return nil, fmt.Errorf("no identity signature %q", kind)
}

func wrap64(s string) []byte {
	var b bytes.Buffer
	for len(s) > 64 {
		b.WriteString(s[:64])
		b.WriteByte('\n')
		s = s[64:]
	}
	b.WriteString(s)
	return b.Bytes()
}

// ---- PKCS #7 (RFC 2315) signed-data, the subset IMDS uses ----

var (
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidSHA256        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidContentType   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSigningTime   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 5}
)

type p7ContentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"optional"` // [0] EXPLICIT
}

type p7IssuerAndSerial struct {
	Issuer asn1.RawValue
	Serial *big.Int
}

type p7SignerInfo struct {
	Version                   int
	IssuerAndSerialNumber     p7IssuerAndSerial
	DigestAlgorithm           pkix.AlgorithmIdentifier
	AuthenticatedAttributes   asn1.RawValue // [0] IMPLICIT SET OF Attribute
	DigestEncryptionAlgorithm pkix.AlgorithmIdentifier
	EncryptedDigest           []byte
}

type p7SignedData struct {
	Version          int
	DigestAlgorithms []pkix.AlgorithmIdentifier `asn1:"set"`
	ContentInfo      p7ContentInfo
	SignerInfos      []p7SignerInfo `asn1:"set"`
}

func explicit0(inner []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner}
}

// attribute encodes Attribute ::= SEQUENCE { type OID, values SET OF ANY }.
func attribute(typ asn1.ObjectIdentifier, value any) ([]byte, error) {
	v, err := asn1.Marshal(value)
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(struct {
		Type   asn1.ObjectIdentifier
		Values asn1.RawValue
	}{typ, asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: v}})
}

func pkcs7Sign(content []byte, sg *signer, now time.Time) ([]byte, error) {
	digest := sha256.Sum256(content)
	var attrs [][]byte
	for _, a := range []struct {
		typ asn1.ObjectIdentifier
		v   any
	}{{oidContentType, oidData}, {oidSigningTime, now.UTC().Truncate(time.Second)}, {oidMessageDigest, digest[:]}} {
		b, err := attribute(a.typ, a.v)
		if err != nil {
			return nil, fmt.Errorf("encoding a signed attribute: %w", err)
		}
		attrs = append(attrs, b)
	}
	sort.Slice(attrs, func(i, j int) bool { return bytes.Compare(attrs[i], attrs[j]) < 0 }) // DER SET OF order
	set := bytes.Join(attrs, nil)
	// The signature covers the attributes encoded as a SET OF (tag 0x31).
	signed, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: set})
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(signed)
	sig, err := rsa.SignPKCS1v15(rand.Reader, sg.key, crypto.SHA256, h[:])
	if err != nil {
		return nil, fmt.Errorf("signing the identity document: %w", err)
	}
	octets, err := asn1.Marshal(content)
	if err != nil {
		return nil, err
	}
	sha := pkix.AlgorithmIdentifier{Algorithm: oidSHA256} // no parameters, as AWS encodes it
	sd := p7SignedData{
		Version:          1,
		DigestAlgorithms: []pkix.AlgorithmIdentifier{sha},
		ContentInfo:      p7ContentInfo{ContentType: oidData, Content: explicit0(octets)},
		SignerInfos: []p7SignerInfo{{
			Version:                   1,
			IssuerAndSerialNumber:     p7IssuerAndSerial{Issuer: asn1.RawValue{FullBytes: sg.cert.RawIssuer}, Serial: sg.cert.SerialNumber},
			DigestAlgorithm:           sha,
			AuthenticatedAttributes:   asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: set},
			DigestEncryptionAlgorithm: pkix.AlgorithmIdentifier{Algorithm: oidRSAEncryption, Parameters: asn1.NullRawValue},
			EncryptedDigest:           sig,
		}},
	}
	return berSignedData(sd, content)
}

// indefinite encodes a constructed value of tag with BER's indefinite
// length: the tag, 0x80, the parts, then the end-of-contents octets.
func indefinite(tag byte, parts ...[]byte) []byte {
	out := []byte{tag, 0x80}
	for _, p := range parts {
		out = append(out, p...)
	}
	return append(out, 0, 0)
}

// berSignedData encodes sd as IMDS serves its rsa2048 message: BER, with
// indefinite lengths on the ContentInfo, the SignedData, the attached
// content and the content as a constructed OCTET STRING of one primitive
// chunk; the algorithms and the SignerInfos inside are DER. (The shape of a
// real message AWS signed: sizer/identity/testdata.) A verifier that reads
// only DER refuses it, as it would refuse AWS's.
func berSignedData(sd p7SignedData, content []byte) ([]byte, error) {
	version, err := asn1.Marshal(sd.Version)
	if err != nil {
		return nil, err
	}
	algs, err := asn1.MarshalWithParams(sd.DigestAlgorithms, "set")
	if err != nil {
		return nil, err
	}
	signers, err := asn1.MarshalWithParams(sd.SignerInfos, "set")
	if err != nil {
		return nil, err
	}
	chunk, err := asn1.Marshal(content)
	if err != nil {
		return nil, err
	}
	dataOID, _ := asn1.Marshal(oidData)
	signedOID, _ := asn1.Marshal(oidSignedData)
	contentInfo := indefinite(0x30, dataOID, indefinite(0xa0, indefinite(0x24, chunk)))
	signedData := indefinite(0x30, version, algs, contentInfo, signers)
	return indefinite(0x30, signedOID, indefinite(0xa0, signedData)), nil
}
