package identity_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/awssdk"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/sizer/identity"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// signed launches an emulator instance and reads its identity document and
// signature of kind through IMDS, as a node does.
func signed(t *testing.T, emu *ec2emu.Server, kind string) (string, []byte, []byte) {
	t.Helper()
	id, doc, sig, err := signedE(emu, kind)
	if err != nil {
		t.Fatal(err)
	}
	return id, doc, sig
}

func signedE(emu *ec2emu.Server, kind string) (string, []byte, []byte, error) {
	ctx := context.Background()
	api, err := ec2p.NewSDKClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: emu.URL(), StaticCredentials: true})
	if err != nil {
		return "", nil, nil, err
	}
	out, err := api.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), InstanceType: types.InstanceTypeG5Xlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String("subnet-a")})
	if err != nil {
		return "", nil, nil, err
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	u, err := emu.IMDSURL(id)
	if err != nil {
		return "", nil, nil, err
	}
	doc, sig, err := imds.New(imds.Options{Endpoint: u, Timeout: 5 * time.Second}).SignedIdentity(ctx, kind)
	return id, doc, sig, err
}

func emulator(t *testing.T) *ec2emu.Server {
	t.Helper()
	emu := ec2emu.New(ec2emu.Options{BootDelay: -1})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	return emu
}

func TestVerifyEmulatorSignatures(t *testing.T) {
	emu := emulator(t)
	certs, err := identity.ParseCertificates(emu.IdentityCertPEM())
	if err != nil {
		t.Fatal(err)
	}
	id, doc, sig := signed(t, emu, identity.KindRSA2048)
	got, err := identity.VerifyPKCS7(string(sig), certs)
	if err != nil {
		t.Fatalf("rsa2048: %v", err)
	}
	if !bytes.Equal(got, doc) {
		t.Errorf("PKCS #7 content differs from the document:\n%s\n%s", got, doc)
	}
	d, err := identity.ParseDocument(got)
	if err != nil {
		t.Fatal(err)
	}
	if d.InstanceID != id || d.Region != "us-east-1" || d.InstanceType != "g5.xlarge" || d.AccountID != ec2emu.DefaultAccount || !strings.HasPrefix(d.AvailabilityZone, "us-east-1") {
		t.Errorf("document %+v", d)
	}

	// the "signature" form, with the emulator's certificate of that kind
	pemRSA, err := emu.IdentityCertPEMFor(ec2emu.IdentitySignature)
	if err != nil {
		t.Fatal(err)
	}
	rsaCerts, _ := identity.ParseCertificates(pemRSA)
	_, doc2, sig2 := signed(t, emu, identity.KindSignature)
	if err := identity.VerifySignature(doc2, string(sig2), rsaCerts); err != nil {
		t.Errorf("signature: %v", err)
	}
	// the wrong certificate, a changed document, a changed signature
	if err := identity.VerifySignature(doc2, string(sig2), certs); err == nil {
		t.Error("signature verified with the rsa2048 certificate")
	}
	if err := identity.VerifySignature(bytes.Replace(doc2, []byte("g5.xlarge"), []byte("p5.48xlarge"), 1), string(sig2), rsaCerts); err == nil {
		t.Error("a changed document verified")
	}
	other := emulator(t)
	otherCerts, _ := identity.ParseCertificates(other.IdentityCertPEM())
	if _, err := identity.VerifyPKCS7(string(sig), otherCerts); err == nil {
		t.Error("rsa2048 verified with another emulator's certificate")
	}
	der, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(sig), "\n", ""))
	tampered := bytes.Replace(der, []byte("g5.xlarge"), []byte("g6.xlarge"), 1)
	if bytes.Equal(tampered, der) {
		t.Fatal("document not found inside the PKCS #7 message")
	}
	if _, err := identity.VerifyPKCS7(base64.StdEncoding.EncodeToString(tampered), certs); err == nil {
		t.Error("a PKCS #7 message with a changed document verified")
	}
}

func TestParseDocumentRefuses(t *testing.T) {
	good := `{"accountId":"123456789012","availabilityZone":"us-east-1a","instanceId":"i-0123456789abcdef0","instanceType":"g5.xlarge","region":"us-east-1","pendingTime":"2026-01-01T00:00:00Z"}`
	if _, err := identity.ParseDocument([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"not json":       "hello",
		"bad instance":   strings.Replace(good, "i-0123456789abcdef0", "i-x", 1),
		"bad account":    strings.Replace(good, "123456789012", "1234", 1),
		"zone elsewhere": strings.Replace(good, "us-east-1a", "eu-west-1a", 1),
		"trailing":       good + "{}",
		"big":            good[:len(good)-1] + `,"x":"` + strings.Repeat("a", 5000) + `"}`,
	} {
		if _, err := identity.ParseDocument([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"accountId":"123456789012","availabilityZone":"us-east-1a","instanceId":"i-0123456789abcdef0","instanceType":"g5.xlarge","region":"us-east-1"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := identity.ParseDocument(b)
		if err == nil && (d.InstanceID == "" || d.Region == "" || !strings.HasPrefix(d.AvailabilityZone, d.Region)) {
			t.Fatalf("accepted %+v", d)
		}
	})
}

// FuzzVerifyPKCS7: arbitrary messages never verify (nor panic) against a
// real certificate; the seed is a real emulator message.
func FuzzVerifyPKCS7(f *testing.F) {
	emu := ec2emu.New(ec2emu.Options{BootDelay: -1})
	if err := emu.Start(); err != nil {
		f.Fatal(err)
	}
	defer emu.Close()
	certs, err := identity.ParseCertificates(emu.IdentityCertPEM())
	if err != nil {
		f.Fatal(err)
	}
	_, orig, sig, err := signedE(emu, identity.KindRSA2048)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(sig))
	f.Add("MIIB")
	f.Fuzz(func(t *testing.T, msg string) {
		// whatever the bytes, a message that verifies carries the document
		// the emulator signed: the signature binds its digest
		if doc, err := identity.VerifyPKCS7(msg, certs); err == nil && !bytes.Equal(doc, orig) {
			t.Fatalf("verified a message carrying %q", doc)
		}
	})
}
