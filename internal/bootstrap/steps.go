package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// startUnit starts a systemd unit; with check it fails when the unit is no
// longer active StartCheck later.
func (b *boot) startUnit(ctx context.Context, unit string, check bool) error {
	if err := b.runCmd(ctx, b.o.Commands.Systemctl, "start", unit); err != nil {
		return err
	}
	if !check {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.StartCheck):
	}
	if err := b.runCmd(ctx, b.o.Commands.Systemctl, "is-active", "--quiet", unit); err != nil {
		return fmt.Errorf("%s stopped within %s of starting (see journalctl -u %s): %w", unit, b.o.StartCheck, unit, err)
	}
	return nil
}

// runCmd runs a program to completion (no shell) and folds its output into the error.
func (b *boot) runCmd(ctx context.Context, prog string, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	cmd := exec.CommandContext(cctx, prog, args...)
	out, err := cmd.CombinedOutput()
	b.log.Debug("ran command", "argv", append([]string{prog}, args...), "duration_ms", ms(time.Since(t0)), "err", err)
	if err != nil {
		return fmt.Errorf("running %s %s: %w: %s", prog, strings.Join(args, " "), err, lastLines(out, 3))
	}
	return nil
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	if s == "" {
		return "(no output)"
	}
	return s
}

func waitFor(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
