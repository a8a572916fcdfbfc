package ec2emu_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"github.com/smallstep/pkcs7"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", pemBytes)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifyRSA2048 checks an rsa2048 message with cert through
// github.com/smallstep/pkcs7, a maintained implementation we did not write
// (BER as AWS serves it), and returns the document it carries.
func verifyRSA2048(t *testing.T, b64 []byte, cert *x509.Certificate) ([]byte, error) {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(b64), "\n", ""))
	if err != nil {
		t.Fatalf("rsa2048 is not base64: %v", err)
	}
	p7, err := pkcs7.Parse(der)
	if err != nil {
		t.Fatalf("rsa2048 is not PKCS #7 signed-data: %v", err)
	}
	if len(p7.Certificates) != 0 {
		t.Errorf("rsa2048 carries %d certificates; IMDS's carries none", len(p7.Certificates))
	}
	p7.Certificates = []*x509.Certificate{cert}
	return p7.Content, p7.Verify()
}

func TestInstanceIdentityDocumentIsSignedAndVerifiesWithTheCertificateOnly(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1, Account: "210987654321"})
	id := launch1(t, c, true)
	cl := imdsClient(t, s, id)
	doc := dynamic(t, cl, "instance-identity/document")

	// The SDK's own parser reads the document; its fields are DescribeInstances'.
	iid, err := cl.GetInstanceIdentityDocument(context.Background(), &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	in := describe(t, c, id)
	want := imds.InstanceIdentityDocument{InstanceID: id, InstanceType: string(in.InstanceType), AvailabilityZone: aws.ToString(in.Placement.AvailabilityZone),
		PrivateIP: aws.ToString(in.PrivateIpAddress), Region: "us-east-1", AccountID: "210987654321", ImageID: aws.ToString(in.ImageId),
		Architecture: "x86_64", Version: "2017-09-30", PendingTime: aws.ToTime(in.LaunchTime)}
	got := iid.InstanceIdentityDocument
	if got.InstanceID != want.InstanceID || got.InstanceType != want.InstanceType || got.AvailabilityZone != want.AvailabilityZone ||
		got.PrivateIP != want.PrivateIP || got.Region != want.Region || got.AccountID != want.AccountID || got.ImageID != want.ImageID ||
		got.Architecture != want.Architecture || got.Version != want.Version || !got.PendingTime.Equal(want.PendingTime) {
		t.Errorf("document = %+v\nwant %+v", got, want)
	}
	for _, key := range []string{`"accountId" : `, `"billingProducts" : null`, `"marketplaceProductCodes" : null`, `"kernelId" : null`, `"ramdiskId" : null`} {
		if !bytes.Contains(doc, []byte(key)) {
			t.Errorf("document lacks %s:\n%s", key, doc)
		}
	}

	rsaCert := parseCert(t, mustPEM(t, s, ec2emu.IdentitySignature))
	rsa2048Cert := parseCert(t, s.IdentityCertPEM())

	t.Run("signature", func(t *testing.T) {
		sig, err := base64.StdEncoding.DecodeString(string(dynamic(t, cl, "instance-identity/signature")))
		if err != nil {
			t.Fatal(err)
		}
		if err := rsaCert.CheckSignature(x509.SHA256WithRSA, doc, sig); err != nil {
			t.Errorf("signature does not verify with the RSA certificate: %v", err)
		}
		forged := bytes.Replace(doc, []byte(id), []byte("i-0forged000000000"), 1)
		if rsaCert.CheckSignature(x509.SHA256WithRSA, forged, sig) == nil {
			t.Error("a changed document verified")
		}
		if rsa2048Cert.CheckSignature(x509.SHA256WithRSA, doc, sig) == nil {
			t.Error("the RSA-2048 certificate verified the base64 signature: the two kinds share a key")
		}
	})
	t.Run("rsa2048", func(t *testing.T) {
		p7 := dynamic(t, cl, "instance-identity/rsa2048")
		content, err := verifyRSA2048(t, p7, rsa2048Cert)
		if err != nil {
			t.Fatalf("rsa2048 does not verify with the RSA-2048 certificate: %v", err)
		}
		if !bytes.Equal(content, doc) {
			t.Errorf("rsa2048 carries %q, not the document", content)
		}
		if _, err := verifyRSA2048(t, p7, rsaCert); err == nil {
			t.Error("the RSA certificate verified the rsa2048 message")
		}
	})
	t.Run("openssl as the EC2 User Guide does it", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("no openssl")
		}
		dir := t.TempDir()
		write := func(name string, b []byte) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		p7 := append(append([]byte("-----BEGIN PKCS7-----\n"), dynamic(t, cl, "instance-identity/rsa2048")...), []byte("\n-----END PKCS7-----\n")...)
		out, err := exec.Command("openssl", "smime", "-verify", "-in", write("rsa2048", p7), "-inform", "PEM",
			"-certfile", write("certificate", s.IdentityCertPEM()), "-noverify").CombinedOutput()
		if err != nil || !bytes.Contains(out, doc) || !strings.Contains(string(out), "Verification successful") {
			t.Errorf("openssl smime -verify: %v\n%s", err, out)
		}
		sig, _ := base64.StdEncoding.DecodeString(string(dynamic(t, cl, "instance-identity/signature")))
		key, err := exec.Command("openssl", "x509", "-pubkey", "-noout", "-in", write("rsa-cert", mustPEM(t, s, ec2emu.IdentitySignature))).Output()
		if err != nil {
			t.Fatal(err)
		}
		out, err = exec.Command("openssl", "dgst", "-sha256", "-verify", write("key", key), "-signature", write("signature", sig), write("document", doc)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Verified OK") {
			t.Errorf("openssl dgst -verify: %v\n%s", err, out)
		}
	})
	// pkcs7 (DSA) is not modelled, and says so with a 404 rather than a wrong signature.
	if _, err := cl.GetDynamicData(context.Background(), &imds.GetDynamicDataInput{Path: "instance-identity/pkcs7"}); err == nil {
		t.Error("pkcs7 served")
	}
}

func mustPEM(t *testing.T, s *ec2emu.Server, kind string) []byte {
	t.Helper()
	b, err := s.IdentityCertPEMFor(kind)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIdentityDocumentPendingTimeFollowsStart(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 200, BootDelay: -1, StopDelay: time.Second, StartDelay: time.Second})
	id := launch1(t, c, false)
	waitState(t, c, id, "running")
	cl := imdsClient(t, s, id)
	before, err := cl.GetInstanceIdentityDocument(context.Background(), &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	stopStart(t, c, id)
	after, err := cl.GetInstanceIdentityDocument(context.Background(), &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	launch := aws.ToTime(describe(t, c, id).LaunchTime)
	if !after.PendingTime.After(before.PendingTime) || !after.PendingTime.Equal(launch) {
		t.Errorf("pendingTime %v -> %v, LaunchTime %v: want the start's time", before.PendingTime, after.PendingTime, launch)
	}
}
