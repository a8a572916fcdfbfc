package identity_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/sizer/identity"
)

// TestRealAWSSignature: a real rsa2048 signature made by AWS (BER, as IMDS
// serves it; see testdata/README.md) verifies with AWS's published
// ap-southeast-2 certificate and yields its document; a changed byte of
// the document, and another region's or the emulator's certificate, do
// not verify. (The hand-written verifier this replaced refused AWS's BER
// encoding: every real node's credential request would have failed.)
func TestRealAWSSignature(t *testing.T) {
	certPEM, err := os.ReadFile("testdata/aws-rsa2048-ap-southeast-2.pem")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := os.ReadFile("testdata/aws-rsa2048-ap-southeast-2.p7")
	if err != nil {
		t.Fatal(err)
	}
	certs, err := identity.ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := identity.VerifyPKCS7(string(msg), certs)
	if err != nil {
		t.Fatalf("AWS's own signature: %v", err)
	}
	d, err := identity.ParseDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	if d.InstanceID != "i-0c5541936caf78c12" || d.Region != "ap-southeast-2" || d.InstanceType != "t4g.small" || d.AccountID != "189292791360" {
		t.Fatalf("document %+v", d)
	}
	// the instance id in the attached document changed (base64 of a
	// different byte, same length): the digest no longer matches
	body := string(msg)
	i := strings.Index(body, "aS0wYzU1NDE5MzZjYWY3OGMxMi")
	if i < 0 {
		t.Fatal("test vector: the instance id's base64 is not where expected")
	}
	tampered := body[:i] + "aS0wYzU1NDE5MzZjYWY3OGMxMy" + body[i+len("aS0wYzU1NDE5MzZjYWY3OGMxMi"):]
	if _, err := identity.VerifyPKCS7(tampered, certs); !errors.Is(err, identity.ErrBadSignature) {
		t.Fatalf("a document with another instance id: %v, want ErrBadSignature", err)
	}
	emu := emulator(t)
	other, err := identity.ParseCertificates(emu.IdentityCertPEM())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := identity.VerifyPKCS7(string(msg), other); !errors.Is(err, identity.ErrBadSignature) {
		t.Fatalf("AWS's signature against the emulator's certificate: %v, want ErrBadSignature", err)
	}
}
