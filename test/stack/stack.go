// Package stack brings up burst's whole local stack on real parts: a real
// Slurm cluster (test/harness; the version BURST_SLURM selects, default
// 22.05), the EC2 emulator (test/ec2emu) whose
// instances boot as network namespaces through burst's own node bootstrap,
// burst-sizer as a daemon, and burst.yaml/burst.conf generated exactly as an
// admin would. The end-to-end tests and `make demo` both use it.
//
// Everything that talks to Slurm runs where the cluster's Slurm runs (for
// 24.11 and 26.05 inside the Debian root's namespace, see harness.Env):
// the hooks slurmctld starts, the nodes' burst-agent bootstrap and slurmd,
// and burst-sizer serve (its reconciler calls scontrol).
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurmconf"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
)

// Options configure a stack.
type Options struct {
	// BinDir holds burst-resume, burst-suspend, burst-sizer, burst-agent
	// (built by `make build`); required.
	BinDir string
	// HookBin is where Slurm's hooks and the nodes' bootstrap find burst's
	// programs, as seen where Slurm runs (e.g. /usr/bin for a package
	// installed into the cluster's Debian root by AdminSetup); default
	// BinDir. The stack itself still runs BinDir's programs on the host.
	HookBin string
	// Configure edits the demo configuration before anything is generated.
	Configure func(*config.Config)
	// Emulator options (IP allocation, hooks and IMDS address are set by the stack).
	Emulator ec2emu.Options
	// Cloud, when set, is an EC2 emulator this stack shares with others
	// (NewCloud: one AWS account and region for several clusters, each
	// with its own cluster.name); Emulator is then unused.
	Cloud *Cloud
	// NoSizer leaves burst-sizer stopped (resume then ranks in-process).
	NoSizer bool
	// EventRule is the EventBridge rule that delivers the emulator's EC2
	// events to burst.yaml's interruption queue (its Queue is set by the
	// stack; delays, drops and duplicates as the test wants). NoEvents
	// leaves the queue unconfigured.
	EventRule ec2emu.EventRule
	NoEvents  bool
	// Boot overrides how an instance becomes a Slurm node; default: run
	// `burst-agent bootstrap` with the instance's user data in its namespace.
	Boot func(ctx context.Context, s *Stack, in ec2emu.Instance, node string) error
	// NodeEnv is added to every node bootstrap's environment (and so to
	// its agent's), e.g. BURST_DEAD_MAN_AFTER=5s.
	NodeEnv []string
	// KeepDir keeps the run directories after Stop.
	KeepDir bool
	// NoLedgerCheck skips the end-of-test comparison of burst's spend with
	// the emulator's bill (test/e2e), for tests that bypass burst's ledger
	// on purpose.
	NoLedgerCheck bool
	Logger        *slog.Logger
	// BaseYAML is the burst.yaml the stack starts from (named BaseName in
	// messages); default: the embedded demo. The stack then points it at
	// this machine (controller, munge, EC2 emulator, local FSx directory,
	// fake GPU devices, state and log paths) before Configure.
	BaseYAML []byte
	BaseName string
	// AdminSetup, when set, makes Slurm's side of burst instead of the
	// stack: slurm.conf is a site's plain file (harness.Options.Plain) and
	// AdminSetup, called with burst.yaml written at s.CfgPath, edits the
	// directory confDir (slurm.conf's) as an admin would before slurmctld
	// starts from it. Burst's own hooks still run through the stack's
	// wrappers (burst.yaml is not at /etc/burst here).
	AdminSetup func(s *Stack, c *harness.Cluster, confDir string) error
	// SlurmConf is added to the slurm.conf burst-slurm-conf's plan makes
	// (a test's own Slurm settings, e.g. SchedulerParameters=...); not with
	// AdminSetup.
	SlurmConf string
	// StateDirSize, when set, puts sizer.state_dir on a tmpfs of that many
	// bytes (a disk a test can fill); unmounted by Stop.
	StateDirSize int64
	// SlurmAPI is burst.yaml's slurm.api: "cli" or "rest" (slurmrestd
	// with JWT: burst mints its tokens from the cluster's key); default
	// BURST_SLURM_API, else cli.
	SlurmAPI string
}

// SlurmAPIFromEnv is the backend BURST_SLURM_API selects (default cli).
func SlurmAPIFromEnv() (string, error) {
	switch v := os.Getenv("BURST_SLURM_API"); v {
	case "", "cli":
		return "cli", nil
	case "rest":
		return v, nil
	default:
		return "", fmt.Errorf("BURST_SLURM_API=%q: want cli or rest", v)
	}
}

// Stack is a running local burst deployment.
type Stack struct {
	opts    Options
	tmpfs   string // the small state directory mounted for Options.StateDirSize
	log     *slog.Logger
	Dir     string // stack directory: burst log, state, fake FSx, user data
	Cfg     *config.Config
	CfgPath string
	Cluster *harness.Cluster
	Emu     *ec2emu.Server // the cloud's (shared with other stacks with Options.Cloud)
	Token   string
	cloud   *Cloud

	sizer    *exec.Cmd
	sizerLog string
	shutdown *http.Server
	offURL   string // base of the nodes' poweroff stand-in
	mu       sync.Mutex
	nodeOf   map[string]string // instance id -> node
	Events   *Timeline
}

// DevGPUs is the number of fake GPU devices made for the cluster.
const DevGPUs = 8

// Start brings the stack up; on error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.BinDir == "" {
		return nil, errors.New("stack: BinDir (burst binaries) is required")
	}
	if abs, err := filepath.Abs(opts.BinDir); err == nil {
		opts.BinDir = abs // bind-mounted at this path into a Slurm root
	}
	if opts.HookBin == "" {
		opts.HookBin = opts.BinDir
	}
	need := []string{"burst-resume", "burst-suspend", "burst-sizer"}
	if opts.Boot == nil {
		need = append(need, "burst-agent")
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("stack: %w (run `make build`)", err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.SlurmAPI == "" {
		api, err := SlurmAPIFromEnv()
		if err != nil {
			return nil, fmt.Errorf("stack: %w", err)
		}
		opts.SlurmAPI = api
	}
	if opts.SlurmAPI != "cli" && opts.SlurmAPI != "rest" {
		return nil, fmt.Errorf("stack: SlurmAPI %q: want cli or rest", opts.SlurmAPI)
	}
	dir, err := os.MkdirTemp("", "burst-stack-")
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s := &Stack{opts: opts, log: log, Dir: dir, nodeOf: map[string]string{}, Events: NewTimeline()}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	// jobs of unprivileged users traverse the stack directory (the fake
	// FSx mount, the hook wrappers) but list nothing in it
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	for _, d := range []string{"dev", "state", "fsx", "userdata", "bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	os.Chmod(filepath.Join(dir, "state"), 0o700)
	os.Chmod(filepath.Join(dir, "userdata"), 0o700)
	for i := 0; i < DevGPUs; i++ {
		if err := syscall.Mknod(filepath.Join(dir, "dev", fmt.Sprintf("nvidia%d", i)), syscall.S_IFCHR|0o666, int(195<<8|i)); err != nil {
			return nil, fmt.Errorf("stack: making fake GPU device: %w", err)
		}
	}
	if s.Token, err = auth.Generate(); err != nil {
		return nil, err
	}
	tokFile := filepath.Join(dir, "sizer.token")
	if err := os.WriteFile(tokFile, []byte(s.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	// the submit-time route credential, world-readable as `token init` writes it
	if err := os.WriteFile(tokFile+".route", []byte(auth.RouteToken(s.Token)+"\n"), 0o644); err != nil {
		return nil, err
	}

	base, baseName := config.DemoYAML, "demo.yaml"
	if opts.BaseYAML != nil {
		base, baseName = opts.BaseYAML, opts.BaseName
	}
	cfg, err := config.Parse(base, baseName)
	if err != nil {
		return nil, fmt.Errorf("stack: %s: %w", baseName, err)
	}
	// Slurm gives PrologSlurmctld/EpilogSlurmctld no SLURM_CONF, so the hooks
	// cannot find a burst.yaml outside /etc/burst: they run through tiny
	// wrappers that set BURST_CONFIG (in production burst.yaml sits at its
	// default path and burst_bin points at the binaries themselves).
	cfg.Slurm.BurstBin = filepath.Join(dir, "bin")
	cfg.Slurm.GresFiles = filepath.Join(dir, "dev", "nvidia")
	if opts.AdminSetup == nil {
		cfg.Slurm.CliFilter = false // enabled by tests that exercise it (needs the Lua file beside slurm.conf)
	}
	cfg.Slurm.GresAutodetect = "off" // fake GPU devices (mknod c 195 N): no NVML here
	cfg.Sizer.TokenFile = tokFile
	cfg.Sizer.StateDir = filepath.Join(dir, "state")
	cfg.Sizer.TLS.CAFile = filepath.Join(dir, "etc", "sizer-ca.pem")
	cfg.Sizer.IdentityCert = filepath.Join(dir, "etc", "ec2-identity.pem")
	cfg.FSx.LocalDir = filepath.Join(dir, "fsx")
	// the "instances" share this machine's mount namespace: mount the fake
	// FSx inside the stack's directory, never on the host's /fsx
	cfg.FSx.MountPoint = filepath.Join(dir, "fsx-mnt")
	cfg.Log.File = filepath.Join(dir, "burst.log")
	// this machine has no GPUs: the nodes' agents simulate them, marked as
	// such in every report (a base burst.yaml for real nodes reads NVML)
	cfg.Agent.GPUSource = "sim"
	cfg.Slurm.NodeConf = "/placeholder/slurm.conf" // set once the cluster exists
	if opts.Configure != nil {
		opts.Configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: demo configuration: %w", err)
	}
	if opts.StateDirSize > 0 {
		if err := mountSmall(cfg.Sizer.StateDir, opts.StateDirSize); err != nil {
			return nil, err
		}
		s.tmpfs = cfg.Sizer.StateDir
	}
	sl, err := harness.SelectedSlurm()
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.Cfg = cfg
	ho := harness.Options{Slurm: &sl, KeepDir: opts.KeepDir, Logger: log,
		Binds:       []string{opts.BinDir, dir, s.tmpfs}, // Slurm runs burst's binaries as hooks; a small state dir is a mount of its own
		SlurmdDelay: -1,                                  // the bootstrap keeps the 2 s boot guard itself
		Prepare:     func(c *harness.Cluster) error { return s.prepare(c) },
		RestJWT:     opts.SlurmAPI == "rest",
	}
	// the harness's nodes need config_overrides: their "hardware" is this
	// machine, smaller than the instance types they stand for
	const overrides = "SlurmdParameters=config_overrides\n"
	if opts.AdminSetup != nil {
		ho.Plain = true
		ho.Fragment = "# the nodes are network namespaces on this machine, smaller than the instance types they stand for\n" + overrides
		ho.Setup = func(c *harness.Cluster) error { return opts.AdminSetup(s, c, filepath.Dir(c.ConfPath())) }
	} else {
		ver, err := slurm.ParseVersion(sl.Release)
		if err != nil {
			return nil, fmt.Errorf("stack: %w", err)
		}
		plan, err := slurmconf.Build(cfg, catalog.Default(), ver)
		if err != nil {
			return nil, err
		}
		ho.Fragment = string(plan.Include()) + "\n" + overrides + "SlurmctldDebug=debug\n" + opts.SlurmConf
		ho.GresConf = string(plan.GresConf())
	}
	s.Cluster, err = harness.Start(ctx, ho)
	if err != nil {
		return nil, fmt.Errorf("stack: starting Slurm: %w", err)
	}
	if opts.SlurmAPI == "rest" {
		// as an admin would set it up: slurmrestd on the controller, burst
		// minting tokens for SlurmUser (root in the harness) from the key,
		// over slurmrestd's unix socket (burst refuses plain HTTP off
		// loopback, and slurmrestd serves TLS only from 25.05)
		s.Cfg.Slurm.API = "rest"
		s.Cfg.Slurm.Rest.URL = "unix:" + s.Cluster.RestSocket()
		s.Cfg.Slurm.Rest.User = "root"
		s.Cfg.Slurm.Rest.JWTKeyFile = s.Cluster.JWTKeyPath()
	}

	cloud := opts.Cloud
	if cloud == nil {
		cloud = NewCloud(opts.Emulator)
		cloud.private = s
	}
	if err := cloud.join(s); err != nil {
		return nil, err
	}
	s.cloud, s.Emu = cloud, cloud.Emu
	s.Cfg.Cluster.EC2Endpoint = s.Emu.URL()
	s.Cfg.Cluster.EC2StaticCredentials = true // the emulator checks no credentials
	if err := s.eventRule(); err != nil {
		return nil, err
	}
	if err := s.startShutdownControl(); err != nil {
		return nil, err
	}
	// the emulator's identity certificate stands for AWS's regional one
	if err := os.WriteFile(s.Cfg.Sizer.IdentityCert, s.Emu.IdentityCertPEM(), 0o644); err != nil {
		return nil, err
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	// the sizer's CA and certificate, as the README's admin step makes them
	if out, err := exec.Command(filepath.Join(opts.BinDir, "burst-sizer"), "--config", s.CfgPath, "tls", "init").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("stack: burst-sizer tls init: %v: %s", err, out)
	}
	if !opts.NoSizer {
		if err := s.StartSizer(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ModelViolations is every way the emulator's responses broke AWS's API
// models so far, one line each ("" when none).
func (s *Stack) ModelViolations() string {
	var b strings.Builder
	for _, v := range s.Emu.ModelViolations() {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}

// CheckpointRoot is the jobs' checkpoint root as the test sees it: the
// directory behind the fake FSx (FSx.LocalDir). Jobs see it at
// NodeCheckpointRoot, where each node's bootstrap bind-mounts it; for a
// Debian root (24.11+) that mount is made in the root's private mount
// namespace and is invisible here, so a test reads and plants checkpoint
// entries through this path, never through the mount point.
func (s *Stack) CheckpointRoot() string {
	return filepath.Join(s.Cfg.FSx.LocalDir, s.Cfg.FSx.CheckpointDir)
}

// NodeCheckpointRoot is the checkpoint root as jobs and burst-agent see it
// on a node (<FSx mount point>/<checkpoint dir>): paths handed to a job.
func (s *Stack) NodeCheckpointRoot() string {
	return filepath.Join(s.Cfg.FSx.MountPoint, s.Cfg.FSx.CheckpointDir)
}

// RunDir is the run directory of a node's bootstrap (its credential,
// nonce, status.json).
func (s *Stack) RunDir(node string) string { return filepath.Join(s.Dir, "run", node) }

// Stop tears everything down: sizer, emulator (and its instances' nodes),
// Slurm, and the stack directory unless KeepDir.
func (s *Stack) Stop() {
	s.StopSizer()
	if s.shutdown != nil {
		s.shutdown.Close()
	}
	if s.cloud != nil {
		s.cloud.leave(s)
	}
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
	if s.Cfg != nil && s.Cfg.FSx.MountPoint != "" && strings.HasPrefix(s.Cfg.FSx.MountPoint, s.Dir) {
		// every node bind-mounted the fake FSx there; undo them all
		for i := 0; i < 64 && syscall.Unmount(s.Cfg.FSx.MountPoint, syscall.MNT_DETACH) == nil; i++ {
		}
	}
	if s.tmpfs != "" {
		unmountAll(s.tmpfs)
	}
	if !s.opts.KeepDir && s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}

// LogPath is burst's own log (resume, suspend, prolog, epilog).
func (s *Stack) LogPath() string { return s.Cfg.Log.File }
