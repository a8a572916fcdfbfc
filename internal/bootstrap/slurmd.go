package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// SlurmdArgs returns slurmd's arguments (without the program and without -D):
// -b reports the boot to slurmctld now (needed for cloud nodes), -N sets the
// node name, and the configuration comes from --conf-server (configless) or -f.
func SlurmdArgs(u userdata.UserData) []string {
	args := []string{"-b", "-N", u.NodeName}
	if u.Slurm.ConfMode == userdata.ConfFile {
		return append(args, "-f", u.Slurm.ConfPath)
	}
	return append(args, "--conf-server", u.Slurm.ConfServer())
}

// InstanceArgs are slurmd's --instance-id and --instance-type, so that
// slurmctld records the node's EC2 instance (scontrol show node:
// InstanceId=, InstanceType=; sacctmgr show instance). slurmd has them from
// Slurm 23.11; an older slurmd exits on an unknown option, so they are
// given by version only, never tried. None for an unknown instance.
func InstanceArgs(v slurm.Version, in Instance) []string {
	if !v.AtLeast(23, 11) || in.ID == "" || in.Type == "" {
		return nil
	}
	return []string{"--instance-id", in.ID, "--instance-type", in.Type}
}

// slurmdVersion asks the node's slurmd its release (`slurmd -V`: "slurm
// 24.11.5"); in systemd mode the unit runs the same binary.
func (b *boot) slurmdVersion(ctx context.Context) (slurm.Version, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, b.o.Commands.Slurmd, "-V").CombinedOutput()
	if err != nil {
		return slurm.Version{}, fmt.Errorf("reading slurmd's release (%s -V): %w: %s", b.o.Commands.Slurmd, err, lastLines(out, 2))
	}
	v, err := slurm.ParseVersion(strings.TrimSpace(string(out)))
	if err != nil {
		return slurm.Version{}, fmt.Errorf("reading slurmd's release (%s -V): %w", b.o.Commands.Slurmd, err)
	}
	return v, nil
}

func (b *boot) slurmd(ctx context.Context) (string, error) {
	if b.o.BootGuard > 0 {
		if wait := time.Until(b.ud.IssuedAt.Add(b.o.BootGuard)); wait > 0 {
			b.log.Info("waiting before slurmd start (slurmctld ignores a boot in the second of the power-up request)", "wait_ms", ms(wait))
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(wait):
			}
			b.waited = wait
		}
	}
	args := SlurmdArgs(b.ud)
	v, err := b.slurmdVersion(ctx)
	if err != nil {
		return "", err
	}
	extra := InstanceArgs(v, b.instance)
	b.instanceArgs = len(extra) > 0
	if len(extra) > 0 {
		b.log.Info("slurmd registers this node's instance", "slurmd_version", v.String(), "instance", b.instance.ID, "instance_type", b.instance.Type)
	}
	args = append(args, extra...)
	switch b.o.Exec {
	case ExecSystemd:
		line, err := envLine("SLURMD_OPTIONS", strings.Join(args, " "))
		if err != nil {
			return "", err
		}
		if err := statefile.WriteAtomic(filepath.Join(b.o.RunDir, "slurmd.env"), []byte(line), 0o644); err != nil {
			return "", fmt.Errorf("writing slurmd.env: %w", err)
		}
		return "", b.startUnit(ctx, b.o.Units.Slurmd, b.o.RegisterTimeout < 0)
	default:
		// The registration wait watches slurmd; StartCheck only without it.
		check := b.o.StartCheck
		if b.o.RegisterTimeout >= 0 {
			check = 0
		}
		argv := append([]string{b.o.Commands.Slurmd, "-D"}, args...)
		done, err := b.startDaemon(ctx, "slurmd", argv, os.Environ(), check)
		b.slurmdDone = done
		return "", err
	}
}

// NodeRegistered interprets the State= of `scontrol show node -o`: done when
// slurmctld has heard from slurmd after the power-up, failed when the node
// went DOWN, DRAIN or INVAL (e.g. its GRES or memory do not match slurm.conf).
func NodeRegistered(state string) (done bool, failed bool) {
	flags := strings.Split(state, "+")
	for _, f := range flags {
		switch f {
		case "DOWN", "INVAL", "DRAIN", "FAIL":
			return false, true
		}
	}
	for _, f := range flags {
		switch f {
		case "NOT_RESPONDING", "POWERING_UP", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "UNKNOWN", "FUTURE":
			return false, false
		}
	}
	return state != "", false
}

func (b *boot) register(ctx context.Context) (string, error) {
	if b.o.RegisterTimeout < 0 {
		return "RegisterTimeout < 0: not waiting for registration", nil
	}
	conf, err := b.clientConf()
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(b.o.RegisterTimeout)
	var state, reason, lastErr string
	lastUnit := time.Now()
	for {
		if b.slurmdDone != nil {
			select {
			case err := <-b.slurmdDone:
				return "", fmt.Errorf("slurmd exited before registering (%v): %s", err, b.slurmdLogTail())
			default:
			}
		} else if b.o.Exec == ExecSystemd && time.Since(lastUnit) > 2*time.Second {
			lastUnit = time.Now()
			if err := b.runCmd(ctx, b.o.Commands.Systemctl, "is-active", "--quiet", b.o.Units.Slurmd); err != nil {
				return "", fmt.Errorf("%s stopped before registering (journalctl -u %s): %w", b.o.Units.Slurmd, b.o.Units.Slurmd, err)
			}
		}
		out, err := b.scontrolOut(ctx, conf, "show", "node", "-o", b.ud.NodeName)
		if err != nil {
			lastErr = err.Error()
		} else {
			state, reason = nodeField(out, "State"), nodeField(out, "Reason")
			done, failed := NodeRegistered(state)
			if done {
				b.log.Info("slurmctld sees the node", "state", state)
				b.checkInstance(ctx, conf, out)
				return "", nil
			}
			if failed {
				return "", fmt.Errorf("slurmctld set the node %s (reason: %s); slurmd: %s", state, reason, b.slurmdLogTail())
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("node not registered with slurmctld within %s (state %q, last scontrol error %q); slurmd: %s",
				b.o.RegisterTimeout, state, lastErr, b.slurmdLogTail())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkInstance makes sure slurmctld records the node's instance once the
// node registered. slurmd 26.05.5 takes --instance-id/--instance-type but
// slurmctld does not record them from its registration (24.11.5 does); the
// node, a Slurm administrator through its munge key, then sets them with
// scontrol update, which every 23.11+ slurmctld accepts. A failure is
// logged: the instance is a record, not something the job needs.
func (b *boot) checkInstance(ctx context.Context, conf, line string) {
	if !b.instanceArgs || nodeField(line, "InstanceId") == b.instance.ID && nodeField(line, "InstanceType") == b.instance.Type {
		return
	}
	args := []string{"update", "NodeName=" + b.ud.NodeName, "InstanceId=" + b.instance.ID, "InstanceType=" + b.instance.Type}
	if _, err := b.scontrolOut(ctx, conf, args...); err != nil {
		b.log.Warn("slurmctld did not record the node's instance from slurmd, and setting it failed", "instance", b.instance.ID, "err", err)
		return
	}
	b.log.Info("slurmctld did not record the node's instance from slurmd's registration; set it with scontrol update",
		"instance", b.instance.ID, "instance_type", b.instance.Type)
}

func (b *boot) slurmdLogTail() string {
	if b.o.Exec == ExecSystemd {
		return "see journalctl -u " + b.o.Units.Slurmd
	}
	return tailFile(filepath.Join(b.o.RunDir, "slurmd.log"), 3)
}

// nodeField returns KEY's value from one `scontrol show node -o` line;
// Reason (which can hold spaces) runs to the next " Key=" it recognises.
func nodeField(line, key string) string {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+1:]
	if key == "Reason" {
		if j := strings.Index(v, " ["); j >= 0 { // "Reason=x [root@2026-...]"
			v = v[:j]
		}
		return strings.TrimSpace(v)
	}
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return v
}
