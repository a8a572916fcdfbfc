package cmd

import (
	"bytes"
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
	p, err := auth.Verify(admin, strings.TrimSpace(out.String()), time.Now())
	if err != nil || p.Account != "vision" || p.Admin {
		t.Errorf("printed credential verifies as %+v, %v", p, err)
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
