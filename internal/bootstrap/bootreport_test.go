package bootstrap

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

func TestBootReportPhases(t *testing.T) {
	pending := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := Report{NodeName: "a10g-1", Started: pending.Add(42 * time.Second), Total: 3 * time.Second, OK: true, Steps: []StepResult{
		{Step: StepMount, Duration: 2 * time.Second}, {Step: StepMunge, Duration: time.Millisecond, Skipped: "already up"},
		{Step: StepRegister, Duration: 300 * time.Millisecond, Err: "timeout"}}}
	b := BootReport(r, imds.Identity{InstanceID: "i-9", InstanceType: "g5.xlarge", PendingTime: pending})
	want := []sizerapi.BootPhase{{Name: sizerapi.PhaseEC2, Seconds: 42}, {Name: StepMount, Seconds: 2}, {Name: StepMunge, Seconds: 0.001, Skipped: true},
		{Name: StepRegister, Seconds: 0.3, Failed: true}, {Name: sizerapi.PhaseTotal, Seconds: 3}}
	if len(b.Phases) != len(want) || b.Node != "a10g-1" || b.InstanceID != "i-9" || !b.OK {
		t.Fatalf("report %+v", b)
	}
	for i := range want {
		if b.Phases[i] != want[i] {
			t.Errorf("phase %d = %+v, want %+v", i, b.Phases[i], want[i])
		}
	}
	// no pending time (IMDS unreachable): no EC2 phase
	if b := BootReport(r, imds.Identity{}); b.Phases[0].Name != StepMount {
		t.Errorf("first phase without a pending time: %+v", b.Phases[0])
	}
}
