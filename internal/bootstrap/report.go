package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// maxReason keeps Slurm node reasons readable in sinfo -R.
const maxReason = 200

// FailureReason is the Slurm node reason recorded for a failed step:
// printable ASCII only, at most 200 characters.
func FailureReason(step string, err error) string {
	s := "burst bootstrap: " + step + ": " + err.Error()
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r > 0x7e || r == '"':
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	s = b.String()
	if len(s) > maxReason {
		s = s[:maxReason-3] + "..."
	}
	return s
}

// HandBackArgs returns the scontrol arguments that hand a failed node back:
// POWER_DOWN_FORCE requeues its jobs at once and makes slurmctld call
// SuspendProgram (burst-suspend terminates the instance); the reason shows
// in sinfo -R and scontrol show node.
func HandBackArgs(node, reason string) []string {
	return []string{"update", "NodeName=" + node, "State=POWER_DOWN_FORCE", "Reason=" + reason}
}

// ClientConf renders a minimal slurm.conf that lets scontrol reach slurmctld
// before slurmd has fetched the configuration (configless mode).
func ClientConf(u userdata.UserData) string {
	var b strings.Builder
	b.WriteString("# written by burst bootstrap for its failure report only\n")
	b.WriteString("ClusterName=" + u.Cluster + "\n")
	for _, c := range u.Slurm.Controllers {
		b.WriteString("SlurmctldHost=" + c + "\n")
	}
	b.WriteString("SlurmctldPort=" + strconv.Itoa(u.Slurm.Port) + "\n")
	b.WriteString("AuthType=auth/munge\nAuthInfo=socket=" + u.Munge.Socket + "\n")
	return b.String()
}

// clientConf returns a slurm.conf for scontrol: the cluster's (file mode) or
// a generated minimal one (configless mode).
func (b *boot) clientConf() (string, error) {
	if b.slurmConf != "" {
		return b.slurmConf, nil
	}
	conf := filepath.Join(b.o.RunDir, "slurm-client.conf")
	if err := statefile.WriteAtomic(conf, []byte(ClientConf(b.ud)), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", conf, err)
	}
	b.slurmConf = conf
	return conf, nil
}

// scontrolOut runs scontrol with SLURM_CONF=conf and a 30 s limit.
func (b *boot) scontrolOut(ctx context.Context, conf string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.o.Commands.Scontrol, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("running %s %s: %w: %s", b.o.Commands.Scontrol, strings.Join(args, " "), err, lastLines(out, 2))
	}
	return string(out), nil
}

// handBack tells slurmctld to power the node down with the failure as reason.
// It returns whether scontrol succeeded.
func (b *boot) handBack(ctx context.Context, failed *StepError) bool {
	reason := FailureReason(failed.Step, failed.Err)
	if !b.haveUD || !b.mungeUp {
		b.log.Error("bootstrap failed before munge was up: cannot authenticate to slurmctld; "+
			"the node is handed back when ResumeTimeout expires", "reason", reason)
		return false
	}
	conf, err := b.clientConf()
	if err != nil {
		b.log.Error("writing client slurm.conf for the failure report", "err", err)
		return false
	}
	args := HandBackArgs(b.ud.NodeName, reason)
	if _, err := b.scontrolOut(context.WithoutCancel(ctx), conf, args...); err != nil {
		b.log.Error("telling slurmctld to hand the node back failed; ResumeTimeout will", "err", err)
		return false
	}
	b.log.Info("told slurmctld to hand the node back", "node", b.ud.NodeName, "state", "POWER_DOWN_FORCE", "reason", reason)
	return true
}
