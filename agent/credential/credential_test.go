package credential

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

const admin = "0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeSizer issues credentials like the sizer (the exchange and the
// renewal), recording what it was asked.
type fakeSizer struct {
	mu       sync.Mutex
	now      func() time.Time
	ttl      time.Duration
	ended    bool
	renewals []string // tokens renewed
	nonces   []string // exchanges
}

func (f *fakeSizer) issue(inst, node string) sizerapi.CredentialResponse {
	exp := f.now().Add(f.ttl).Truncate(time.Second)
	tok, _ := auth.IssueNode(admin, auth.NodeClaims{InstanceID: inst, Node: node, Expires: exp})
	return sizerapi.CredentialResponse{Credential: tok, Node: node, InstanceID: inst, Expires: exp, RenewAfter: f.now().Add(f.ttl / 2)}
}

type client struct {
	f   *fakeSizer
	tok string
}

func (c client) RenewCredential(context.Context) (sizerapi.CredentialResponse, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.f.ended {
		return sizerapi.CredentialResponse{}, &sizerclient.APIError{Status: 401, Code: sizerapi.CodeEnded, Message: "terminated"}
	}
	p, err := auth.Verify(admin, c.tok, c.f.now(), nil)
	if err != nil {
		return sizerapi.CredentialResponse{}, &sizerclient.APIError{Status: 401, Code: sizerapi.CodeUnauthorized, Message: err.Error()}
	}
	c.f.renewals = append(c.f.renewals, c.tok)
	return c.f.issue(p.InstanceID, p.Node), nil
}

func (c client) NodeCredential(_ context.Context, rq sizerapi.CredentialRequest) (sizerapi.CredentialResponse, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.tok != sizerclient.Anonymous || rq.Document != "doc" || rq.Signature != "sig" {
		return sizerapi.CredentialResponse{}, errors.New("bad exchange")
	}
	c.f.nonces = append(c.f.nonces, rq.Nonce)
	return c.f.issue("i-0123456789abcdef0", "gpu-1"), nil
}

func TestRenewer(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	fs := &fakeSizer{now: clock, ttl: time.Hour}
	file, nonce := filepath.Join(dir, "agent.credential"), filepath.Join(dir, "identity.nonce")
	first := fs.issue("i-0123456789abcdef0", "gpu-1")
	os.WriteFile(file, []byte(first.Credential+"\n"), 0o400)
	os.WriteFile(nonce, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	r := New(Options{File: file, NonceFile: nonce, Now: clock,
		Client:   func(tok string) (Sizer, error) { return client{fs, tok}, nil },
		Identity: func(context.Context) ([]byte, []byte, error) { return []byte("doc"), []byte("sig"), nil }})
	ctx := context.Background()
	if did, err := r.Check(ctx); did || err != nil {
		t.Fatalf("fresh credential renewed: %v %v", did, err)
	}
	now = now.Add(31 * time.Minute) // past half its life
	if did, err := r.Check(ctx); !did || err != nil || len(fs.renewals) != 1 || fs.renewals[0] != first.Credential {
		t.Fatalf("half-life renewal: %v %v %v", did, err, fs.renewals)
	}
	tok, c, err := Read(file)
	if err != nil || tok == first.Credential || !c.Expires.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("renewed file: %q %+v %v", tok, c, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o400 {
		t.Errorf("credential file mode %v", fi.Mode())
	}
	// the sizer was down past the expiry: the identity is proved again
	now = now.Add(2 * time.Hour)
	if did, err := r.Check(ctx); !did || err != nil || len(fs.nonces) != 1 || fs.nonces[0] != strings.Repeat("ab", 32) {
		t.Fatalf("after expiry: %v %v nonces %v", did, err, fs.nonces)
	}
	// the instance ended: no new credential, the renewer stops
	fs.ended = true
	now = now.Add(45 * time.Minute)
	if _, err := r.Check(ctx); !errors.Is(err, ErrEnded) {
		t.Fatalf("ended: %v", err)
	}
	if err := r.Run(ctx); !errors.Is(err, ErrEnded) {
		t.Fatalf("Run on an ended instance: %v", err)
	}
	// no credential at all (the node booted with the sizer down): exchange
	fs.ended = false
	os.Remove(file)
	r2 := New(Options{Node: "gpu-1", File: file, NonceFile: nonce, Now: clock,
		Client:   func(tok string) (Sizer, error) { return client{fs, tok}, nil },
		Identity: func(context.Context) ([]byte, []byte, error) { return []byte("doc"), []byte("sig"), nil }})
	if did, err := r2.Check(ctx); !did || err != nil || len(fs.nonces) != 2 {
		t.Fatalf("without a credential: %v %v", did, err)
	}
	if _, c, err := Read(file); err != nil || c.Node != "gpu-1" {
		t.Fatalf("credential after the late exchange: %+v %v", c, err)
	}
	os.Remove(file)
	r3 := New(Options{Node: "gpu-9", File: file, NonceFile: nonce, Now: clock,
		Client:   func(tok string) (Sizer, error) { return client{fs, tok}, nil },
		Identity: func(context.Context) ([]byte, []byte, error) { return []byte("doc"), []byte("sig"), nil }})
	if _, err := r3.Check(ctx); err == nil {
		t.Fatal("accepted a credential for another node")
	}
}

// TestRenewerClockSkew: the node's clock runs hours ahead of the sizer's,
// or behind it, by more than the credential's life. Over a day of polls
// the credential in the file is always valid by the sizer's clock, it is
// renewed about twice a life, and the identity is never proved again.
func TestRenewerClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{0, 2 * time.Hour, -2 * time.Hour, 20 * time.Minute, -50 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			dir := t.TempDir()
			sizerNow := time.Unix(1_800_000_000, 0)
			fs := &fakeSizer{now: func() time.Time { return sizerNow }, ttl: time.Hour}
			nodeNow := func() time.Time { return sizerNow.Add(skew) }
			file, nonce := filepath.Join(dir, "agent.credential"), filepath.Join(dir, "identity.nonce")
			os.WriteFile(nonce, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
			r := New(Options{Node: "gpu-1", File: file, NonceFile: nonce, Now: nodeNow,
				Client:   func(tok string) (Sizer, error) { return client{fs, tok}, nil },
				Identity: func(context.Context) ([]byte, []byte, error) { return []byte("doc"), []byte("sig"), nil }})
			ctx := context.Background()
			if _, err := r.Check(ctx); err != nil { // boot: the first exchange
				t.Fatal(err)
			}
			for i := 0; i < 24*12; i++ {
				sizerNow = sizerNow.Add(5 * time.Minute)
				if _, err := r.Check(ctx); err != nil {
					t.Fatalf("poll %d: %v", i, err)
				}
				tok, _, err := Read(file)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := auth.Verify(admin, tok, sizerNow, nil); err != nil {
					t.Fatalf("poll %d (%s after boot): the credential on disk is refused by the sizer: %v", i, time.Duration(i+1)*5*time.Minute, err)
				}
			}
			if len(fs.nonces) != 1 {
				t.Errorf("the identity was proved %d times; want once, at boot", len(fs.nonces))
			}
			if n := len(fs.renewals); n < 40 || n > 52 {
				t.Errorf("%d renewals in a day of a one-hour credential; want about 48", n)
			}
		})
	}
}
