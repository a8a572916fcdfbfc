package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

func TestBootReport(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	c := f.client(t, auth.NodeToken(f.token, "a10g-3"))
	rep := sizerapi.BootReport{Node: "a10g-3", InstanceID: "i-1", OK: true, Phases: []sizerapi.BootPhase{
		{Name: sizerapi.PhaseEC2, Seconds: 31.5}, {Name: "mount", Seconds: 2.25}, {Name: "register", Seconds: 0.3},
		{Name: "munge", Seconds: 0.001, Skipped: true}, {Name: sizerapi.PhaseTotal, Seconds: 4}}}
	if err := c.Boot(ctx, rep); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(f.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(b)
	for _, want := range []string{
		`burst_boot_phase_seconds_sum{class="a10g",phase="ec2-pending-to-bootstrap"} 31.5`,
		`burst_boot_phase_seconds_sum{class="a10g",phase="mount"} 2.25`,
		`burst_boot_phase_seconds_count{class="a10g",phase="register"} 1`,
		`burst_boot_phase_seconds_sum{class="a10g",phase="bootstrap-total"} 4`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, `phase="munge"`) {
		t.Error("a skipped step was observed")
	}
	// another node's report, bad phases: refused
	bad := rep
	bad.Node = "a10g-4"
	if err := c.Boot(ctx, bad); !isStatus(err, 403) {
		t.Errorf("another node's report: %v", err)
	}
	for _, ph := range []sizerapi.BootPhase{{Name: "Mount; rm", Seconds: 1}, {Name: "mount", Seconds: -1}, {Name: "mount", Seconds: 1e9}} {
		bad = rep
		bad.Phases = []sizerapi.BootPhase{ph}
		if err := c.Boot(ctx, bad); !isStatus(err, 400) {
			t.Errorf("phase %+v: %v", ph, err)
		}
	}
	bad = rep
	bad.Phases = nil
	if err := c.Boot(ctx, bad); !isStatus(err, 400) {
		t.Errorf("no phases: %v", err)
	}
}
