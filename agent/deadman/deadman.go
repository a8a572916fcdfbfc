// Package deadman is burst-agent's dead-man switch: an instance whose node
// Slurm has powered down or marked down, or whose controller has been
// unreachable, for longer than a configured time powers itself off, which
// terminates it (InstanceInitiatedShutdownBehavior=terminate at launch). It is
// the node's own guarantee that no GPU bills without Slurm knowing, when
// SuspendProgram or the reconciler cannot reach it (a lost head node, a
// network partition, a bug).
package deadman

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Slurm is what the switch reads.
type Slurm interface {
	Nodes(ctx context.Context, names ...string) ([]slurm.Node, error)
}

// Terminator ends this instance.
type Terminator interface {
	TerminateSelf(ctx context.Context) error
}

// Options configure the switch.
type Options struct {
	Node   string
	After  time.Duration // how long the node may be down or cut off
	Poll   time.Duration // default 30 s
	Now    func() time.Time
	Logger *slog.Logger
}

// Switch watches this node in Slurm.
type Switch struct {
	sl    Slurm
	term  Terminator
	o     Options
	since time.Time // when the node was first seen down/unreachable; zero when fine
	why   string
}

// New returns a switch.
func New(sl Slurm, term Terminator, o Options) *Switch {
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Switch{sl: sl, term: term, o: o}
}

// State classifies this node: "" when it is fine, else why it counts as
// abandoned.
func State(nodes []slurm.Node, err error, node string) string {
	if err != nil {
		return "controller unreachable: " + err.Error()
	}
	for _, n := range nodes {
		if n.Name != node {
			continue
		}
		switch {
		case n.HasFlag("POWERED_DOWN") || n.HasFlag("POWER_DOWN") || n.HasFlag("POWERING_DOWN"):
			return "Slurm powered the node down (" + n.StateString() + ")"
		case n.State == "DOWN":
			return "Slurm marked the node down (" + n.StateString() + ", reason " + n.Reason + ")"
		}
		return ""
	}
	return "Slurm does not know node " + node
}

// Check observes the node once and terminates the instance when it has been
// abandoned for longer than After. It reports whether it fired.
func (s *Switch) Check(ctx context.Context) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ns, err := s.sl.Nodes(qctx, s.o.Node)
	cancel()
	why := State(ns, err, s.o.Node)
	now := s.o.Now()
	if why == "" {
		if !s.since.IsZero() {
			s.o.Logger.Info("dead-man switch: node back in service", "was", s.why)
		}
		s.since, s.why = time.Time{}, ""
		return false, nil
	}
	if s.since.IsZero() {
		s.since = now
		s.o.Logger.Warn("dead-man switch armed", "why", why, "fires_after", s.o.After)
	}
	s.why = why
	if now.Sub(s.since) < s.o.After {
		return false, nil
	}
	s.o.Logger.Error("dead-man switch: terminating this instance", "why", why, "since", s.since)
	if err := s.term.TerminateSelf(ctx); err != nil {
		return false, fmt.Errorf("dead-man switch: terminating this instance: %w", err)
	}
	return true, nil
}

// Run checks every Poll until ctx ends or the switch fired.
func (s *Switch) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	for {
		fired, err := s.Check(ctx)
		if err != nil {
			s.o.Logger.Error("dead-man switch", "err", err)
		}
		if fired {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PowerOff ends this instance by powering it off: burst launches every
// instance with InstanceInitiatedShutdownBehavior=terminate (and a spot
// instance's poweroff terminates it anyway), so the node needs no EC2
// rights at all, and a job that cannot become root cannot end other
// instances. Argv is the command (default systemctl poweroff).
type PowerOff struct {
	Argv []string
}

// TerminateSelf implements Terminator.
func (p PowerOff) TerminateSelf(ctx context.Context) error {
	argv := p.Argv
	if len(argv) == 0 {
		argv = []string{"/usr/bin/systemctl", "poweroff"}
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// EmulatorShutdown is PowerOff for an EC2 emulator "instance" (a network
// namespace cannot power a machine off): it POSTs the emulator's shutdown
// control URL for this instance (BURST_EMU_SHUTDOWN_URL), which the
// emulator treats as the instance's own poweroff. Test only.
type EmulatorShutdown struct {
	URL string
}

// TerminateSelf implements Terminator.
func (e EmulatorShutdown) TerminateSelf(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("emulator shutdown: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
