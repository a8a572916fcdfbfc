package cmd

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/config/configtest"
)

// TestTokenAccount: `burst-sizer token account NAME` prints the account's
// read-only credential, which the sizer verifies as that account only; a
// bad account name is a usage error (exit 2).
func TestTokenAccount(t *testing.T) {
	c := configtest.Demo(t)
	tf := c.Sizer.TokenFile
	cfg := configtest.Write(t, c)
	var out, errb bytes.Buffer
	if code := runSizer(&out, &errb, "token", "init", tf); code != 0 {
		t.Fatalf("token init: %d %s", code, errb.String())
	}
	admin, err := auth.LoadToken(tf)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", cfg, "token", "account", "vision"); code != 0 {
		t.Fatalf("token account: %d %s", code, errb.String())
	}
	p, err := auth.Verify(admin, strings.TrimSpace(out.String()), time.Now(), nil)
	if err != nil || p.Account != "vision" || p.Admin {
		t.Errorf("printed credential verifies as %+v, %v", p, err)
	}
	if !p.Expires.After(time.Now().Add(89*24*time.Hour)) || p.Expires.After(time.Now().Add(91*24*time.Hour)) {
		t.Errorf("default credential expires %s, want in 90 days", p.Expires)
	}
	first := strings.TrimSpace(out.String())
	rf := &auth.RotationFile{Path: tf + auth.RotationsSuffix}
	// --valid-for, then --rotate: the earlier credentials are refused, the new one works
	out.Reset()
	if code := runSizer(&out, &errb, "--config", cfg, "token", "account", "--valid-for", "2h", "vision"); code != 0 {
		t.Fatalf("token account --valid-for 2h: %d %s", code, errb.String())
	}
	short := strings.TrimSpace(out.String())
	if p, err := auth.Verify(admin, short, time.Now().Add(3*time.Hour), rf.Generation); err == nil {
		t.Errorf("a 2h credential verifies 3 h later as %+v", p)
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", cfg, "token", "account", "--rotate", "vision"); code != 0 || !strings.Contains(errb.String(), "every earlier one is refused") {
		t.Fatalf("token account --rotate: %d %s", code, errb.String())
	}
	rotated := strings.TrimSpace(out.String())
	for _, old := range []string{first, short} {
		if _, err := auth.Verify(admin, old, time.Now(), rf.Generation); !errors.Is(err, auth.ErrRevoked) {
			t.Errorf("a credential from before the rotation: %v, want ErrRevoked", err)
		}
	}
	if p, err := auth.Verify(admin, rotated, time.Now(), rf.Generation); err != nil || p.Account != "vision" {
		t.Errorf("the rotated credential: %+v %v", p, err)
	}
	for _, bad := range []string{"30m", "9000h"} {
		if code := runSizer(&out, &errb, "--config", cfg, "token", "account", "--valid-for", bad, "vision"); code != 2 {
			t.Errorf("--valid-for %s: exit %d, want 2", bad, code)
		}
	}
	errb.Reset()
	if code := runSizer(&out, &errb, "--config", cfg, "token", "account", "a b"); code != 2 || !strings.Contains(errb.String(), "only letters") {
		t.Errorf("bad account name: exit %d, %q", code, errb.String())
	}
	// one prefix: the program's, once
	if strings.Count(errb.String(), "burst-sizer") != 1 || !strings.HasPrefix(errb.String(), "burst-sizer: ") {
		t.Errorf("message prefixed more than once: %q", errb.String())
	}
}
