// Package bootstrap brings a burst GPU instance into the Slurm cluster at boot:
// it reads the instance's user data (internal/userdata), closes instance
// metadata to every user but root (firewall.go), proves its identity to
// burst-sizer with its signed identity document and gets back its node name
// and sizer credential (nodeident.go), installs the munge key and starts
// munged, mounts FSx for Lustre, creates the checkpoint root (root-owned,
// 0755: the Prolog makes each job's directory), starts slurmd -b -N <node>
// and starts burst-agent. Every step is logged with log/slog and timed.
//
// In production the image's burst-bootstrap.service runs `burst-agent
// bootstrap` (ExecSystemd): daemons are started with `systemctl start` from
// units baked into the image, with their per-boot settings in env files under
// RunDir. The end-to-end tests run the same code in ExecDirect mode inside a
// network namespace: daemons are started as detached child processes, and the
// user data's Test.LocalFSDir switch replaces the Lustre mount with a bind mount.
//
// After starting slurmd it waits (Options.RegisterTimeout) until slurmctld
// shows the node registered, so a slurmd that cannot fetch its configuration
// or authenticate fails the bootstrap instead of a later ResumeTimeout.
//
// On failure Run returns an error naming the step (the caller exits non-zero,
// so the systemd unit fails), and, when munge is already up, asks slurmctld to
// hand the node back at once with
//
//	scontrol update NodeName=<node> State=POWER_DOWN_FORCE Reason="burst bootstrap: <step>: <error>"
//
// which requeues the node's jobs and makes Slurm call SuspendProgram
// (burst-suspend terminates the instance). Root on a node holding the cluster's
// munge key is a Slurm administrator, so no extra rights are needed. When
// munge is not up yet (user data or key unreadable) nothing can authenticate
// to slurmctld; the node is then handed back by ResumeTimeout, which marks it
// DOWN and powers it off.
package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// ExecMode says how daemons are started.
type ExecMode string

const (
	// ExecSystemd starts daemons with `systemctl start <unit>` (production image).
	ExecSystemd ExecMode = "systemd"
	// ExecDirect starts daemons as detached child processes (end-to-end tests, no systemd).
	ExecDirect ExecMode = "direct"
)

// Step names, as logged and as used in StepResult and failure reasons.
const (
	StepUserData       = "userdata"
	StepFirewall       = "imds-firewall"
	StepIdentity       = "identity"
	StepMunge          = "munge"
	StepMount          = "mount"
	StepCheckpointRoot = "checkpoint-root"
	StepSlurmd         = sizerapi.PhaseSlurmd
	StepRegister       = sizerapi.PhaseRegister
	StepAgent          = "agent"
)

// Commands are the programs the bootstrap runs, by absolute path.
type Commands struct {
	Mount     string // default /usr/bin/mount
	Systemctl string // default /usr/bin/systemctl
	Munged    string // default /usr/sbin/munged (direct mode)
	Slurmd    string // default /usr/sbin/slurmd (direct mode)
	Scontrol  string // default /usr/bin/scontrol (failure report)
	Agent     string // default /usr/local/bin/burst-agent (direct mode)
	Nft       string // default /usr/sbin/nft (the IMDS firewall)
}

// Units are the systemd units started in ExecSystemd mode.
type Units struct {
	Munge  string // default munge.service
	Slurmd string // default slurmd.service
	Agent  string // default burst-agent.service
}

// Options configure Run. The zero value plus Exec is the production setup.
type Options struct {
	// Exec is ExecSystemd or ExecDirect (required).
	Exec ExecMode
	// UserDataFile reads the user data from this file instead of IMDS.
	UserDataFile string
	// NodeName, when set, is the node the caller expects this instance to
	// be; the identity exchange (which names the node) must agree.
	NodeName string
	// NonceFile keeps the node's identity nonce across reboots (default
	// /var/lib/burst-agent/identity.nonce; RunDir/identity.nonce in direct
	// mode).
	NonceFile string
	// SizerWait is how long a sizer that does not answer may delay the
	// boot (default 15 s); the node then joins without a credential.
	SizerWait time.Duration
	// RootOnly are further endpoint URLs the IMDS firewall closes to
	// non-root users (the test stack's poweroff stand-in).
	RootOnly []string
	// IdentityTimeout bounds the retries of the identity exchange (the
	// instance's node tag may land a moment after boot); default 2 minutes.
	IdentityTimeout time.Duration
	// IMDSEndpoint overrides the instance metadata endpoint used to read user
	// data, instance tags and instance-role credentials (default
	// http://169.254.169.254); when set, burst-agent gets it too
	// (BURST_IMDS_ENDPOINT), ahead of the user data's agent.imds_endpoint.
	IMDSEndpoint string
	// RunDir holds env files, the agent credential, pid files, daemon logs
	// (direct mode) and status.json (default /run/burst).
	RunDir string
	// Commands and Units override program paths and unit names.
	Commands Commands
	Units    Units
	// BootGuard is the minimum time between user data issued_at and slurmd's
	// start (default 2 s; negative disables). See userdata.UserData.IssuedAt.
	BootGuard time.Duration
	// StartCheck is how long a started daemon must stay up to count as started
	// (default 1 s).
	StartCheck time.Duration
	// RegisterTimeout bounds the wait for slurmctld to see the node registered
	// (State without NOT_RESPONDING/POWERING_UP) after slurmd starts; a slurmd
	// that dies or never registers is a failure handed back with its last log
	// lines. Default 90 s (keep it below ResumeTimeout); negative: don't wait.
	RegisterTimeout time.Duration
	// MountAttempts is how often the Lustre mount is tried (default 3, 3 s apart).
	MountAttempts int
	// CleanExec is an argv prefix that execs its arguments with an empty signal
	// mask and default dispositions (see ExecClean), e.g.
	// {"/usr/local/bin/burst-agent", "exec-clean", "--"}. Used in direct mode
	// only, and only when this process runs with HUP/INT/TERM/USR1/USR2 blocked or
	// ignored (as anything started from slurmctld's ResumeProgram does).
	CleanExec []string
	// GPUGate, if set, checks the GPUs before slurmd starts (gpugate.go);
	// GateTimeout bounds it (default DefaultGateTimeout).
	GPUGate     GPUGate `json:"-"`
	GateTimeout time.Duration
	// SecretsManagerEndpoint overrides https://secretsmanager.<region>.amazonaws.com (tests).
	SecretsManagerEndpoint string
	// Credentials for Secrets Manager (default: the instance role via IMDS).
	Credentials aws.CredentialsProvider
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// StepResult is one step's outcome.
type StepResult struct {
	Step     string        `json:"step"`
	Duration time.Duration `json:"duration_ns"`
	Skipped  string        `json:"skipped,omitempty"` // why the step did nothing
	// Waited is the part of Duration spent in the boot guard (slurmd step).
	Waited time.Duration `json:"waited_ns,omitempty"`
	Err    string        `json:"error,omitempty"`
}

// Report is what Run did, also written to RunDir/status.json.
type Report struct {
	NodeName string        `json:"node_name,omitempty"`
	Started  time.Time     `json:"started"`
	Total    time.Duration `json:"total_ns"`
	Steps    []StepResult  `json:"steps"`
	OK       bool          `json:"ok"`
	// HandedBack says the failure was reported to slurmctld (POWER_DOWN_FORCE).
	HandedBack bool `json:"handed_back,omitempty"`
}

// StepError is returned by Run when a step fails.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return "burst bootstrap: " + e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// RunReport performs the whole bootstrap and returns per-step timings. On
// failure the error is a *StepError and the report says whether slurmctld was
// told to hand the node back.
func RunReport(ctx context.Context, o Options) (Report, error) {
	if err := o.setDefaults(); err != nil {
		return Report{}, err
	}
	b := &boot{o: o, log: o.Logger}
	return b.run(ctx)
}

func (o *Options) setDefaults() error {
	switch o.Exec {
	case ExecSystemd, ExecDirect:
	case "":
		return errors.New("bootstrap options: Exec is empty; want \"systemd\" or \"direct\"")
	default:
		return fmt.Errorf("bootstrap options: Exec %q; want \"systemd\" or \"direct\"", o.Exec)
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.RunDir, "/run/burst")
	def(&o.Commands.Mount, "/usr/bin/mount")
	def(&o.Commands.Systemctl, "/usr/bin/systemctl")
	def(&o.Commands.Munged, "/usr/sbin/munged")
	def(&o.Commands.Slurmd, "/usr/sbin/slurmd")
	def(&o.Commands.Scontrol, "/usr/bin/scontrol")
	def(&o.Commands.Agent, "/usr/local/bin/burst-agent")
	def(&o.Commands.Nft, "/usr/sbin/nft")
	if o.Exec == ExecDirect {
		def(&o.NonceFile, filepath.Join(o.RunDir, "identity.nonce"))
	}
	def(&o.NonceFile, "/var/lib/burst-agent/identity.nonce")
	if o.IdentityTimeout <= 0 {
		o.IdentityTimeout = 2 * time.Minute
	}
	if o.SizerWait <= 0 {
		o.SizerWait = 15 * time.Second
	}
	def(&o.Units.Munge, "munge.service")
	def(&o.Units.Slurmd, "slurmd.service")
	def(&o.Units.Agent, "burst-agent.service")
	if o.BootGuard == 0 {
		o.BootGuard = 2 * time.Second
	}
	if o.StartCheck <= 0 {
		o.StartCheck = time.Second
	}
	if o.RegisterTimeout == 0 {
		o.RegisterTimeout = 90 * time.Second
	}
	if o.MountAttempts <= 0 {
		o.MountAttempts = 3
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if !filepath.IsAbs(o.RunDir) {
		return fmt.Errorf("bootstrap options: RunDir %q is not absolute", o.RunDir)
	}
	return nil
}

type boot struct {
	o        Options
	log      *slog.Logger
	ud       userdata.UserData
	haveUD   bool
	named    bool     // the identity exchange named the node
	instance Instance // from the identity document; zero when unreadable
	// instanceArgs: slurmd was given --instance-id/--instance-type
	instanceArgs bool
	mungeUp      bool
	slurmConf    string   // a slurm.conf scontrol can use for the failure report
	firewalled   []string // the endpoint URLs the IMDS firewall closes (the agent re-checks them)
	rep          Report

	maskChecked bool // cleanSignalsOK ran
	needClean   bool // start daemons through Options.CleanExec

	slurmdDone <-chan error  // direct mode: receives slurmd's exit
	waited     time.Duration // boot-guard wait of the current step
}

func (b *boot) run(ctx context.Context) (Report, error) {
	b.rep.Started = time.Now()
	if err := os.MkdirAll(b.o.RunDir, 0o755); err != nil {
		return b.rep, &StepError{Step: StepUserData, Err: fmt.Errorf("creating run dir %s: %w", b.o.RunDir, err)}
	}
	b.log.Info("burst bootstrap starting", "exec", string(b.o.Exec), "run_dir", b.o.RunDir)
	steps := []struct {
		name string
		fn   func(context.Context) (string, error)
	}{
		{StepUserData, b.readUserData},
		{StepFirewall, b.firewall},
		{StepIdentity, b.identity},
		{StepMunge, b.munge},
		{StepMount, b.mount},
		{StepCheckpointRoot, b.checkpointRoot},
		{StepGPUGate, b.gpuGate},
		{StepSlurmd, b.slurmd},
		// the agent starts before the registration wait: slurmctld may start
		// the job the moment slurmd registers, and a short job would
		// otherwise run unsampled (on 24.11 the node's state shows
		// registered seconds after the job is already running)
		{StepAgent, b.agent},
		{StepRegister, b.register},
	}
	var failed *StepError
	for _, s := range steps {
		log := b.log.With("step", s.name)
		if b.named {
			log = log.With("node", b.ud.NodeName)
		}
		log.Info("step starting")
		t0 := time.Now()
		b.waited = 0
		skipped, err := s.fn(ctx)
		d := time.Since(t0)
		r := StepResult{Step: s.name, Duration: d, Skipped: skipped, Waited: b.waited}
		if err != nil {
			r.Err = err.Error()
			b.rep.Steps = append(b.rep.Steps, r)
			log.Error("step failed", "duration_ms", ms(d), "err", err)
			failed = &StepError{Step: s.name, Err: err}
			break
		}
		b.rep.Steps = append(b.rep.Steps, r)
		if skipped != "" {
			log.Info("step skipped", "duration_ms", ms(d), "why", skipped)
		} else {
			log.Info("step done", "duration_ms", ms(d))
		}
	}
	b.rep.Total = time.Since(b.rep.Started)
	b.rep.NodeName = b.ud.NodeName
	if failed != nil {
		b.rep.HandedBack = b.handBack(ctx, failed)
	} else {
		b.rep.OK = true
		b.log.Info("burst bootstrap done", "node", b.ud.NodeName, "total_ms", ms(b.rep.Total))
	}
	b.writeStatus()
	b.sendBootReport(ctx)
	if failed != nil {
		return b.rep, failed
	}
	return b.rep, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (b *boot) writeStatus() {
	data, err := json.MarshalIndent(b.rep, "", "  ")
	if err == nil {
		err = statefile.WriteAtomic(filepath.Join(b.o.RunDir, "status.json"), append(data, '\n'), 0o644)
	}
	if err != nil {
		b.log.Warn("writing status.json", "err", err)
	}
}
