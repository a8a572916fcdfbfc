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
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurmconf"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
)

// Options configure a stack.
type Options struct {
	// BinDir holds burst-resume, burst-suspend, burst-sizer, burst-agent
	// (built by `make build`); required.
	BinDir string
	// Configure edits the demo configuration before anything is generated.
	Configure func(*config.Config)
	// Emulator options (IP allocation, hooks and IMDS address are set by the stack).
	Emulator ec2emu.Options
	// NoSizer leaves burst-sizer stopped (resume then ranks in-process).
	NoSizer bool
	// Boot overrides how an instance becomes a Slurm node; default: run
	// `burst-agent bootstrap` with the instance's user data in its namespace.
	Boot func(ctx context.Context, s *Stack, in ec2emu.Instance, node string) error
	// KeepDir keeps the run directories after Stop.
	KeepDir bool
	Logger  *slog.Logger
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
	log     *slog.Logger
	Dir     string // stack directory: burst log, state, fake FSx, user data
	Cfg     *config.Config
	CfgPath string
	Cluster *harness.Cluster
	Emu     *ec2emu.Server
	Token   string

	sizer    *exec.Cmd
	sizerLog string
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
	for _, d := range []string{"dev", "state", "fsx", "userdata", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	os.Chmod(filepath.Join(dir, "state"), 0o700)
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

	cfg, err := config.Parse(config.DemoYAML, "demo.yaml")
	if err != nil {
		return nil, fmt.Errorf("stack: embedded demo config: %w", err)
	}
	// Slurm gives PrologSlurmctld/EpilogSlurmctld no SLURM_CONF, so the hooks
	// cannot find a burst.yaml outside /etc/burst: they run through tiny
	// wrappers that set BURST_CONFIG (in production burst.yaml sits at its
	// default path and burst_bin points at the binaries themselves).
	cfg.Slurm.BurstBin = filepath.Join(dir, "bin")
	cfg.Slurm.GresFiles = filepath.Join(dir, "dev", "nvidia")
	cfg.Slurm.CliFilter = false // enabled by tests that exercise it (needs the Lua file beside slurm.conf)
	cfg.Sizer.TokenFile = tokFile
	cfg.Sizer.StateDir = filepath.Join(dir, "state")
	cfg.FSx.LocalDir = filepath.Join(dir, "fsx")
	// the "instances" share this machine's mount namespace: mount the fake
	// FSx inside the stack's directory, never on the host's /fsx
	cfg.FSx.MountPoint = filepath.Join(dir, "fsx-mnt")
	cfg.Log.File = filepath.Join(dir, "burst.log")
	cfg.Slurm.NodeConf = "/placeholder/slurm.conf" // set once the cluster exists
	if opts.Configure != nil {
		opts.Configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: demo configuration: %w", err)
	}
	plan, err := slurmconf.Build(cfg, catalog.Default())
	if err != nil {
		return nil, err
	}
	s.Cfg = cfg
	// the harness's nodes need config_overrides: their "hardware" is this
	// machine, smaller than the instance types they stand for
	fragment := string(plan.Include()) + "\nSlurmdParameters=config_overrides\nSlurmctldDebug=debug\n"

	s.Cluster, err = harness.Start(ctx, harness.Options{
		Fragment: fragment, GresConf: string(plan.GresConf()), KeepDir: opts.KeepDir, Logger: log,
		Binds:       []string{opts.BinDir, dir}, // Slurm runs burst's binaries as hooks
		SlurmdDelay: -1,                         // the bootstrap keeps the 2 s boot guard itself
		Prepare:     func(c *harness.Cluster) error { return s.prepare(c) },
		RestJWT:     opts.SlurmAPI == "rest",
	})
	if err != nil {
		return nil, fmt.Errorf("stack: starting Slurm: %w", err)
	}
	if opts.SlurmAPI == "rest" {
		// as an admin would set it up: slurmrestd on the controller, burst
		// minting tokens for SlurmUser (root in the harness) from the key
		s.Cfg.Slurm.API = "rest"
		s.Cfg.Slurm.Rest.URL = s.Cluster.RestURL()
		s.Cfg.Slurm.Rest.User = "root"
		s.Cfg.Slurm.Rest.JWTKeyFile = s.Cluster.JWTKeyPath()
	}

	eo := opts.Emulator
	eo.Region = cfg.Cluster.Region
	eo.Subnets = map[string]string{}
	for z, sn := range cfg.Network.Subnets {
		eo.Subnets[sn] = z
	}
	eo.IMDSHost = s.Cluster.ControllerAddr().String()
	eo.AllocateIP = func(ec2emu.Instance) (string, error) {
		ip, err := s.Cluster.AllocIP()
		return ip.String(), err
	}
	eo.ReleaseIP = func(in ec2emu.Instance) {
		if ip, err := netip.ParseAddr(in.PrivateIP); err == nil {
			s.Cluster.ReleaseIP(ip)
		}
	}
	eo.OnStart = s.onStart
	eo.OnStop = s.onStop
	if eo.Logger == nil {
		eo.Logger = log
	}
	s.Emu = ec2emu.New(eo)
	if err := s.Emu.Start(); err != nil {
		return nil, fmt.Errorf("stack: starting the EC2 emulator: %w", err)
	}
	s.Cfg.Cluster.EC2Endpoint = s.Emu.URL()
	s.Cfg.Cluster.EC2StaticCredentials = true // the emulator checks no credentials
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if !opts.NoSizer {
		if err := s.StartSizer(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// prepare runs once the cluster's directory and network exist: it points
// burst.yaml at the controller and writes it beside slurm.conf, where
// burst-resume and burst-suspend find it through $SLURM_CONF.
func (s *Stack) prepare(c *harness.Cluster) error {
	s.Cluster = c
	ctld, _ := c.Ports()
	s.Cfg.Slurm.Controller = c.ControllerAddr().String()
	s.Cfg.Slurm.ControllerPort = ctld
	s.Cfg.Slurm.NodeConf = c.ConfPath()
	s.Cfg.Slurm.ConfDir = filepath.Dir(c.ConfPath())
	// nodes share this machine's file system: they use the cluster's own
	// munge key and running munged, never the host's /etc/munge
	key := filepath.Join(c.Dir(), "munge", "key", "munge.key")
	s.Cfg.Slurm.MungeKeySource = "file://" + key
	s.Cfg.Slurm.MungeKeyPath = key
	s.Cfg.Slurm.MungeSocket = c.MungeSocket()
	port, err := freePort(c.ControllerAddr().String())
	if err != nil {
		return err
	}
	s.Cfg.Sizer.Listen = net.JoinHostPort(c.ControllerAddr().String(), strconv.Itoa(port))
	s.Cfg.Sizer.URL = "http://" + s.Cfg.Sizer.Listen
	s.CfgPath = filepath.Join(filepath.Dir(c.ConfPath()), "burst.yaml")
	for _, b := range []string{"burst-resume", "burst-suspend", "burst-agent"} {
		w := fmt.Sprintf("#!/bin/sh\nBURST_CONFIG=%s exec %s \"$@\"\n", s.CfgPath, filepath.Join(s.opts.BinDir, b))
		if err := os.WriteFile(filepath.Join(s.Dir, "bin", b), []byte(w), 0o755); err != nil {
			return err
		}
	}
	return s.writeConfig()
}

func (s *Stack) writeConfig() error {
	if s.CfgPath == "" {
		return nil
	}
	b, err := yaml.Marshal(s.Cfg)
	if err != nil {
		return fmt.Errorf("stack: writing burst.yaml: %w", err)
	}
	if err := os.WriteFile(s.CfgPath, b, 0o644); err != nil {
		return fmt.Errorf("stack: writing burst.yaml: %w", err)
	}
	if _, err := config.Load(s.CfgPath); err != nil {
		return fmt.Errorf("stack: the burst.yaml it wrote does not load: %w", err)
	}
	return nil
}

// UpdateConfig edits burst.yaml while the stack runs (Slurm's hooks read it
// on every call).
func (s *Stack) UpdateConfig(f func(*config.Config)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.Cfg)
	return s.writeConfig()
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartSizer starts `burst-sizer serve` and waits until it answers.
func (s *Stack) StartSizer(ctx context.Context) error {
	s.sizerLog = filepath.Join(s.Dir, "sizer.log")
	lf, err := os.OpenFile(s.sizerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	// not bound to ctx: the daemon outlives the start-up; StopSizer ends it
	cmd := s.Cluster.Command(context.Background(), filepath.Join(s.opts.BinDir, "burst-sizer"), "--config", s.CfgPath, "serve")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting burst-sizer: %w", err)
	}
	s.sizer = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Cfg.Sizer.Listen, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	tail, _ := os.ReadFile(s.sizerLog)
	return fmt.Errorf("burst-sizer did not listen on %s within 20 s; its log:\n%s", s.Cfg.Sizer.Listen, tail)
}

// StopSizer stops the sizer daemon (SIGTERM, as systemd would).
func (s *Stack) StopSizer() {
	if s.sizer == nil || s.sizer.Process == nil {
		return
	}
	s.sizer.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.sizer.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.sizer.Process.Pid, syscall.SIGKILL)
		<-done
	}
	s.sizer = nil
}

func (s *Stack) onStart(in ec2emu.Instance) {
	node := ec2p.NodeOf(in.Tags, in.LaunchIndex)
	if node == "" {
		s.log.Error("emulated instance has no node tag; leaving it unbooted", "instance", in.ID)
		return
	}
	s.mu.Lock()
	for id, n := range s.nodeOf {
		if n == node {
			// a second instance for a node that already has one (a
			// duplicate launch): it runs, but it is not the node
			s.mu.Unlock()
			s.Events.Add(node, "duplicate instance", in.ID+" (node already booted by "+id+")")
			return
		}
	}
	s.nodeOf[in.ID] = node
	s.mu.Unlock()
	s.Events.Add(node, "instance running", in.ID+" "+in.InstanceType+" "+in.Lifecycle)
	boot := s.opts.Boot
	if boot == nil {
		boot = BootstrapNode
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := boot(ctx, s, in, node); err != nil {
		s.log.Error("booting node", "node", node, "instance", in.ID, "err", err)
	}
}

func (s *Stack) onStop(in ec2emu.Instance) {
	s.mu.Lock()
	node := s.nodeOf[in.ID]
	delete(s.nodeOf, in.ID)
	s.mu.Unlock()
	if node == "" {
		return
	}
	s.Events.Add(node, "instance stopped", in.ID)
	if err := s.Cluster.StopNode(node); err != nil {
		s.log.Warn("stopping node namespace", "node", node, "err", err)
	}
}

// BootstrapNode is the default Options.Boot; tests that boot only some
// instances differently wrap it. It boots an instance the way the node
// image does: the
// instance's user data goes to `burst-agent bootstrap` in direct mode inside
// the node's network namespace.
func BootstrapNode(ctx context.Context, s *Stack, in ec2emu.Instance, node string) error {
	ud := filepath.Join(s.Dir, "userdata", in.ID)
	if err := os.WriteFile(ud, in.UserData, 0o600); err != nil {
		return err
	}
	ip, err := netip.ParseAddr(in.PrivateIP)
	if err != nil {
		return fmt.Errorf("instance %s private IP %q: %w", in.ID, in.PrivateIP, err)
	}
	run := filepath.Join(s.Dir, "run", node)
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	agent := filepath.Join(s.opts.BinDir, "burst-agent")
	_, err = s.Cluster.StartNode(ctx, node, ip, agent, "bootstrap", "--exec", "direct", "--user-data-file", ud,
		"--imds-endpoint", in.IMDSURL, "--run-dir", run, "--node-name", node)
	return err
}

// Stop tears everything down: sizer, emulator (and its instances' nodes),
// Slurm, and the stack directory unless KeepDir.
func (s *Stack) Stop() {
	s.StopSizer()
	if s.Emu != nil {
		s.Emu.Close()
	}
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
	if s.Cfg != nil && s.Cfg.FSx.MountPoint != "" && strings.HasPrefix(s.Cfg.FSx.MountPoint, s.Dir) {
		// every node bind-mounted the fake FSx there; undo them all
		for i := 0; i < 64 && syscall.Unmount(s.Cfg.FSx.MountPoint, syscall.MNT_DETACH) == nil; i++ {
		}
	}
	if !s.opts.KeepDir && s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}

// LogPath is burst's own log (resume, suspend, prolog, epilog).
func (s *Stack) LogPath() string { return s.Cfg.Log.File }
