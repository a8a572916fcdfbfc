package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/test/stack"
)

// TestSecurityRouteMunge: the route credential is world-readable (cli_filter
// runs as the submitting user), so with sizer.route_auth: munge (the
// default) the sizer decides only for the user a MUNGE credential proves.
// As the cluster's ordinary user, on the cluster's own munged and Slurm
// release (each ships its own unmunge):
//   - `burst-sizer route` for themselves is decided by the daemon;
//   - `burst-sizer route --user root` is refused by the daemon (403) and
//     so decided in-process, from burst.yaml alone;
//   - a raw request with the route credential and no MUNGE credential is
//     401; one whose MUNGE credential is the user's but whose body names
//     another user is 403; the same credential sent again is a replay
//     (401); a forged credential is 401.
func TestSecurityRouteMunge(t *testing.T) {
	s := start(t, stack.Options{})
	if s.Cfg.Sizer.RouteAuth != "munge" {
		t.Fatalf("sizer.route_auth is %q; the default must be munge", s.Cfg.Sizer.RouteAuth)
	}
	ctx := context.Background()
	u := s.Cluster.User()
	route := func(args ...string) (string, string) {
		t.Helper()
		c := s.Cluster.UserCommand(ctx, u, filepath.Join(binDir, "burst-sizer"), append([]string{"--config", s.CfgPath, "route", "--json", "--gres=gpu:1"}, args...)...)
		var so, se strings.Builder
		c.Stdout, c.Stderr = &so, &se
		if err := c.Run(); err != nil {
			t.Fatalf("burst-sizer route %v as %s: %v\n%s%s", args, u.Name, err, so.String(), se.String())
		}
		var a struct {
			DecidedBy string `json:"decided_by"`
		}
		if err := json.Unmarshal([]byte(so.String()), &a); err != nil {
			t.Fatalf("route --json printed %q: %v", so.String(), err)
		}
		return a.DecidedBy, se.String()
	}
	if by, log := route(); by != "daemon" {
		t.Fatalf("route as %s for themselves: decided by %q, want the daemon (MUNGE works on this cluster)\n%s", u.Name, by, log)
	}
	if by, _ := route("--user=root"); by != "local" {
		t.Fatalf("route as %s claiming user root: decided by %q, want local (the daemon refuses the claim)", u.Name, by)
	}

	// the route credential where docs/SECURITY.md says it is: <token_file>.route, 0644
	tok, err := auth.LoadCredential(s.Cfg.Sizer.TokenFile + ".route")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sizerclient.New(s.Cfg.Sizer.URL, tok, sizerclient.WithCAFile(s.Cfg.Sizer.TLS.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	mungeCred := func() string {
		t.Helper()
		out, err := s.Cluster.UserCommand(ctx, u, "/usr/bin/munge", "--no-input", "--socket", s.Cfg.Slurm.MungeSocket).Output()
		if err != nil {
			t.Fatalf("munge -n as %s: %v", u.Name, err)
		}
		return strings.TrimSpace(string(out))
	}
	status := func(err error) int {
		var ae *sizerclient.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	job := func(user string) sizerapi.JobRequest { return sizerapi.JobRequest{User: user, GPUsPerNode: 1} }
	if _, err := cl.RouteAs(ctx, job(u.Name), ""); status(err) != http.StatusUnauthorized {
		t.Errorf("route credential without MUNGE: %v; want 401", err)
	}
	if _, err := cl.RouteAs(ctx, job("root"), mungeCred()); status(err) != http.StatusForbidden {
		t.Errorf("%s's MUNGE credential for user root: %v; want 403", u.Name, err)
	}
	c := mungeCred()
	if _, err := cl.RouteAs(ctx, job(u.Name), c); err != nil {
		t.Errorf("%s's MUNGE credential for themselves: %v; want a decision", u.Name, err)
	}
	if _, err := cl.RouteAs(ctx, job(u.Name), c); status(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "Replayed") {
		t.Errorf("the same MUNGE credential again: %v; want 401, replayed", err)
	}
	forged := mungeCred()
	forged = forged[:len(forged)-8] + strings.Repeat("A", 7) + ":"
	if _, err := cl.RouteAs(ctx, job(u.Name), forged); status(err) != http.StatusUnauthorized {
		t.Errorf("a tampered MUNGE credential: %v; want 401", err)
	}
	if _, err := cl.RouteAs(ctx, job(u.Name), "MUNGE:$(reboot):"); status(err) != http.StatusUnauthorized {
		t.Errorf("a malformed MUNGE credential: %v; want 401", err)
	}
}
