package bootstrap

import (
	"context"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

// BootReport turns a bootstrap report into the phases the sizer publishes
// (burst_boot_phase_seconds): EC2 pending to the bootstrap's start when the
// pending time is known, each step, and the bootstrap's total.
func BootReport(r Report, id imds.Identity) sizerapi.BootReport {
	b := sizerapi.BootReport{Node: r.NodeName, InstanceID: id.InstanceID, InstanceType: id.InstanceType, PendingTime: id.PendingTime,
		Started: r.Started, OK: r.OK}
	if !id.PendingTime.IsZero() && !r.Started.Before(id.PendingTime) {
		b.Phases = append(b.Phases, sizerapi.BootPhase{Name: sizerapi.PhaseEC2, Seconds: r.Started.Sub(id.PendingTime).Seconds()})
	}
	for _, s := range r.Steps {
		b.Phases = append(b.Phases, sizerapi.BootPhase{Name: s.Step, Seconds: s.Duration.Seconds(), Skipped: s.Skipped != "", Failed: s.Err != ""})
	}
	b.Phases = append(b.Phases, sizerapi.BootPhase{Name: sizerapi.PhaseTotal, Seconds: r.Total.Seconds()})
	return b
}

// sendBootReport reads the identity document and posts the boot's phases to
// the sizer, best effort: a boot never fails or waits long for its report.
func (b *boot) sendBootReport(ctx context.Context) {
	if !b.named || b.ud.Agent.SizerURL == "" {
		return // no credential: the identity exchange did not happen
	}
	tok, err := auth.LoadCredential(filepath.Join(b.o.RunDir, CredentialFileName))
	if err != nil {
		b.log.Warn("no boot report: the node credential is unreadable", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	endpoint := b.o.IMDSEndpoint
	if endpoint == "" {
		endpoint = b.ud.Agent.IMDSEndpoint
	}
	id, err := imds.New(imds.Options{Endpoint: endpoint, Timeout: 2 * time.Second}).Identity(ctx)
	if err != nil {
		b.log.Warn("boot report without EC2's pending time", "err", err)
	}
	rep := BootReport(b.rep, id)
	for _, ph := range rep.Phases {
		if ph.Name == sizerapi.PhaseEC2 {
			b.log.Info("boot phase", "phase", ph.Name, "seconds", ph.Seconds, "pending_time", id.PendingTime)
		}
	}
	c, err := sizerclient.New(b.ud.Agent.SizerURL, tok, sizerclient.WithCA([]byte(b.ud.Agent.SizerCA)), sizerclient.WithFallbackURLs(b.ud.Agent.SizerURLs...))
	if err == nil {
		err = c.Boot(ctx, rep)
	}
	if err != nil {
		b.log.Warn("sending the boot report to the sizer", "err", err)
		return
	}
	b.log.Info("boot report sent", "phases", len(rep.Phases))
}
