package rest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A token computed outside Go (Python's hmac and base64, see the commit
// that added it): HS256 over {"alg":"HS256","typ":"JWT"} and
// {"exp":1800000300,"iat":1800000000,"sun":"slurm"}.
const (
	vectorKey   = "burst-test-key-0123456789abcdef!"
	vectorToken = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE4MDAwMDAzMDAsImlhdCI6MTgwMDAwMDAwMCwic3VuIjoic2x1cm0ifQ.B3d5VFyIxFpen_RovgoJOS0vHH_iJ9Dg9FKwCfLCwhs"
)

func TestMintTokenVector(t *testing.T) {
	got := MintToken([]byte(vectorKey), "slurm", time.Unix(1800000000, 0), 5*time.Minute)
	if got != vectorToken {
		t.Fatalf("MintToken =\n%s\nwant\n%s", got, vectorToken)
	}
}

func writeSecret(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMintedRenewal: a minted token is reused until two thirds of its
// lifetime have passed, then replaced.
func TestMintedRenewal(t *testing.T) {
	key := writeSecret(t, "jwt.key", vectorKey, 0o600)
	m, err := newMinted(key, "slurm", 6*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1800000000, 0)
	user, first, _ := m.token(t0)
	if user != "slurm" {
		t.Fatalf("user %q", user)
	}
	_, _, exp, err := ParseTokenFile([]byte(first))
	if err != nil || !exp.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("minted token: exp %v, %v", exp, err)
	}
	if _, again, _ := m.token(t0.Add(3 * time.Minute)); again != first {
		t.Error("renewed before two thirds of the lifetime")
	}
	if _, renewed, _ := m.token(t0.Add(4*time.Minute + time.Second)); renewed == first {
		t.Error("not renewed after two thirds of the lifetime")
	}
	if _, back, _ := m.token(t0.Add(-time.Hour)); back == first {
		t.Error("a clock that jumped back kept a token issued in its future")
	}
}

func TestCredentialFilesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() error
		want string
	}{
		{"world-readable key", func() error {
			_, err := newMinted(writeSecret(t, "k", vectorKey, 0o644), "slurm", 0)
			return err
		}, "mode 0644"},
		{"group-readable key", func() error {
			_, err := newMinted(writeSecret(t, "k", vectorKey, 0o640), "slurm", 0)
			return err
		}, "mode 0640"},
		{"short key", func() error {
			_, err := newMinted(writeSecret(t, "k", "short", 0o600), "slurm", 0)
			return err
		}, "at least 16"},
		{"key without user", func() error {
			_, err := newMinted(writeSecret(t, "k", vectorKey, 0o600), "", 0)
			return err
		}, "no user name"},
		{"missing key", func() error {
			_, err := newMinted(filepath.Join(t.TempDir(), "none"), "slurm", 0)
			return err
		}, "no such file"},
		{"world-readable token", func() error {
			_, err := newTokenFile(writeSecret(t, "tok", vectorToken, 0o604), "")
			return err
		}, "mode 0604"},
		{"not a token", func() error {
			_, err := newTokenFile(writeSecret(t, "tok", "hunter2", 0o600), "")
			return err
		}, "not a JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), vectorKey) || strings.Contains(err.Error(), vectorToken) {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestTokenFileReread: a renewed token file is read again; an expired
// token is refused, saying how to renew it.
func TestTokenFileReread(t *testing.T) {
	path := writeSecret(t, "token", "SLURM_JWT="+vectorToken+"\n", 0o600)
	tf, err := newTokenFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1800000100, 0)
	user, tok, err := tf.token(now)
	if err != nil || user != "slurm" || tok != vectorToken {
		t.Fatalf("token() = %q, %q, %v", user, tok, err)
	}
	if _, _, err := tf.token(time.Unix(1800000300, 0)); err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "scontrol token") {
		t.Fatalf("expired token: %v", err)
	}
	next := MintToken([]byte(vectorKey), "root", time.Unix(1800000200, 0), time.Hour)
	if err := os.WriteFile(path, []byte(next+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user, tok, err = tf.token(time.Unix(1800000300, 0))
	if err != nil || user != "root" || tok != next {
		t.Fatalf("after renewal: %q, %q, %v", user, tok, err)
	}
	// a configured user name wins over the token's
	tf2, err := newTokenFile(path, "slurm")
	if err != nil {
		t.Fatal(err)
	}
	if user, _, _ := tf2.token(time.Unix(1800000300, 0)); user != "slurm" {
		t.Errorf("user %q, want the configured slurm", user)
	}
}

func TestParseTokenFile(t *testing.T) {
	for _, tc := range []struct {
		in, sun, err string
	}{
		{vectorToken, "slurm", ""},
		{"  SLURM_JWT=" + vectorToken + "\n", "slurm", ""},
		{"", "", "empty"},
		{vectorToken + "\n" + vectorToken, "", "more than one"},
		{"a.b", "", "three dot-separated"},
		{"eyJhbGciOiJIUzI1NiJ9.!!!.x", "", "not base64url"},
		{"eyJhbGciOiJIUzI1NiJ9.WzFd.x", "", "not a JSON object"},                    // [1]
		{"eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjF9.x", "", `no "sun"`},                     // {"exp":1}
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJhIiwiZXhwIjoiMSJ9.x", "", "not a number"}, // {"sun":"a","exp":"1"}
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJhIiwiZXhwIjoxLjV9.x", "", "whole number"}, // {"sun":"a","exp":1.5}
	} {
		_, sun, _, err := ParseTokenFile([]byte(tc.in))
		switch {
		case tc.err == "" && (err != nil || sun != tc.sun):
			t.Errorf("ParseTokenFile(%.30q) = %q, %v; want %q", tc.in, sun, err, tc.sun)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseTokenFile(%.30q) = %v, want an error with %q", tc.in, err, tc.err)
		}
	}
}

func FuzzParseTokenFile(f *testing.F) {
	f.Add([]byte(vectorToken))
	f.Add([]byte("SLURM_JWT=" + vectorToken))
	f.Add([]byte("a.b.c"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, sun, _, err := ParseTokenFile(b)
		if err != nil {
			return
		}
		if sun == "" || strings.Count(tok, ".") != 2 || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("accepted %q as token %q of %q", b, tok, sun)
		}
	})
}
