package imdsguard

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/slurm"
)

// drains records the guard's node updates; fail makes the next one fail.
type drains struct {
	got  []slurm.NodeUpdate
	fail bool
}

func (d *drains) UpdateNodes(_ context.Context, u ...slurm.NodeUpdate) error {
	if d.fail {
		d.fail = false
		return errors.New("slurmctld unreachable")
	}
	d.got = append(d.got, u...)
	return nil
}

func endpoints(t *testing.T, s ...string) []bootstrap.Endpoint {
	t.Helper()
	var out []bootstrap.Endpoint
	for _, e := range s {
		ep, err := bootstrap.ParseEndpoint(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ep)
	}
	return out
}

// TestGuard against nft's own output (captured from nftables 1.0.6 with
// the bootstrap's rules: internal/bootstrap/testdata).
func TestGuard(t *testing.T) {
	listed, err := os.ReadFile("../../internal/bootstrap/testdata/nft-list.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := func(context.Context) ([]byte, error) { return listed, nil }
	gone := func(context.Context) ([]byte, error) {
		return nil, errors.New("Error: No such file or directory; list table inet burst_imds")
	}
	want := endpoints(t, "169.254.169.254", "fd00:ec2::254", "10.64.3.1:41234")

	d := &drains{}
	g, _ := New(ok, d, Options{Node: "a10g-1", Want: want})
	if p := g.Check(ctx); p != "" || len(d.got) != 0 {
		t.Fatalf("rules in place: problem %q, drains %v", p, d.got)
	}

	g.list = gone
	if p := g.Check(ctx); !strings.Contains(p, "burst_imds") || len(d.got) != 1 {
		t.Fatalf("table gone: problem %q, drains %v", p, d.got)
	}
	if u := d.got[0]; u.State != "DRAIN" || u.Names[0] != "a10g-1" || !strings.HasPrefix(u.Reason, "security: IMDS firewall gone") || len(u.Reason) > 120 {
		t.Fatalf("drain %+v", u)
	}
	g.Check(ctx)
	if len(d.got) != 1 {
		t.Fatalf("drained again: %v", d.got)
	}
	g.list = ok
	if p := g.Check(ctx); p != "" || len(d.got) != 1 {
		t.Fatalf("rules back: %q %v (the node stays drained: no resume)", p, d.got)
	}

	// a rule missing for one endpoint names it; a failed drain is retried
	d2 := &drains{fail: true}
	g2, _ := New(ok, d2, Options{Node: "a10g-2", Want: append(want, endpoints(t, "10.9.9.9:80")...)})
	if p := g2.Check(ctx); !strings.Contains(p, "10.9.9.9:80") || len(d2.got) != 0 {
		t.Fatalf("missing endpoint, drain failing: %q %v", p, d2.got)
	}
	if g2.Check(ctx); len(d2.got) != 1 || !strings.Contains(d2.got[0].Reason, "10.9.9.9:80") {
		t.Fatalf("retried drain: %v", d2.got)
	}
	if _, err := New(ok, d, Options{Node: "x"}); err == nil {
		t.Fatal("a guard with nothing to check")
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, s := range []string{"169.254.169.254", "fd00:ec2::254", "10.0.0.1:8080", "[fd00::1]:80"} {
		e, err := bootstrap.ParseEndpoint(s)
		if err != nil || e.String() != s {
			t.Errorf("%q: %v %v", s, e, err)
		}
	}
	for _, s := range []string{"", "host:80", "10.0.0.1:0", "10.0.0.1:x", "1.2.3.4:99999"} {
		if _, err := bootstrap.ParseEndpoint(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
