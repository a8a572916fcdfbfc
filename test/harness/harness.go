// Package harness runs a real, private Slurm cluster for end-to-end tests and
// demos: its own munged, slurmctld (and optionally slurmrestd) on a per-run
// bridge, and slurmd "nodes" each in a network namespace of its own.
//
// Slurm versions: 22.05 runs from the host's Debian 12 packages; 24.11 and
// 26.05 from Debian roots (trixie, sid) that scripts/slurm-roots.sh builds
// once per machine. Options.Slurm (default: BURST_SLURM) selects one. A
// root's processes (daemons, clients, the hooks slurmctld runs) all run in
// one private mount namespace per cluster (see Env); paths under the run
// dir, os.TempDir() and Options.Binds are the same inside and outside.
//
// Everything a run creates is unique to it (temp dir, munge key and socket,
// TCP ports, bridge, 10.x.y.0/24 subnet, namespaces, veths), so several runs
// coexist on one machine, and Stop removes all of it. It must run as root.
//
// Signal masks: every process the harness starts gets an empty signal mask
// (slurm.StartUnblocked). That matters because slurmctld runs its hooks
// (ResumeProgram, ...) with SIGTERM and others blocked, and anything a hook
// starts inherits the mask unless the starter clears it; processes the harness
// itself starts from `go test` would be fine anyway.
//
// An external "cloud" (test/stack wires test/ec2emu so): burst's slurm.conf
// fragment names burst-resume as ResumeProgram; burst-resume asks the cloud
// for instances; the cloud's instance-start hook takes an address from the
// harness subnet (Cluster.AllocIP) and boots the node's slurmd there
// (Cluster.StartSlurmd), and its terminate hook stops it (Cluster.StopNode).
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a cluster. The zero value works.
type Options struct {
	// Name is the ClusterName; default "bst<id>".
	Name string
	// Fragment is slurm.conf text written to <dir>/etc/fragment.conf and
	// Included by the generated slurm.conf: nodes, partitions, power saving
	// (burst's generated include goes here). Every parameter it sets at the
	// start of a line replaces the harness default of that name.
	// Placeholders: {{DIR}} (run dir), {{DEVDIR}} (fake GPU devices),
	// {{CONF}} (slurm.conf path), {{CTLD_ADDR}}, {{BINDIR}}, {{SBINDIR}}.
	Fragment string
	// GresConf is the content of gres.conf (same placeholders), e.g.
	// "AutoDetect=off\nNodeName=gpu-[1-2] Name=gpu File={{DEVDIR}}/nvidia[0-1]\n".
	// Default: "AutoDetect=off\n".
	GresConf string
	// GPUs is the number of fake GPU devices <DevDir>/nvidia0..N-1
	// (character devices 195:N) to create; default 8.
	GPUs int
	// Prepare, if set, runs after the run dir exists and before slurm.conf is
	// written (e.g. to write hook scripts into c.Dir()).
	Prepare func(c *Cluster) error
	// Plain makes slurm.conf a site's own file before anything of burst's:
	// cluster, hosts, ports, munge, state and log paths, plugins, and the
	// Fragment inline; no power saving, no cloud settings (PrivateData,
	// SlurmctldParameters, TreeWidth, GresTypes), no gres.conf. Setup then
	// makes an admin's edits.
	Plain bool
	// Setup, if set, runs after slurm.conf (and gres.conf) are written in
	// c.ConfPath()'s directory and before slurmctld starts from it: the
	// edits an admin makes before starting slurmctld.
	Setup func(c *Cluster) error
	// RestAPI starts slurmrestd on the unix socket c.RestSocket().
	RestAPI bool
	// RestJWT starts slurmrestd (RestAPI implied) with rest_auth/jwt, as
	// sites that expose Slurm through its REST API run it: on the unix
	// socket and on a TCP port of the bridge address (RestURL, reachable
	// from the nodes), with slurm.conf's AuthAltTypes=auth/jwt and
	// AuthAltParameters=jwt_key=JWTKeyPath() (a random HS256 key, 0600,
	// owned by SlurmUser). Clients send X-SLURM-USER-NAME and
	// X-SLURM-USER-TOKEN (a JWT signed with that key, or `scontrol token`).
	RestJWT bool
	// KeepDir leaves the run dir (logs, conf) in place after Stop.
	KeepDir bool
	// BaseDir is where the run dir is made; default os.TempDir().
	BaseDir string
	// BinDir holds the Slurm clients (scontrol, sbatch, ...); default /usr/bin.
	BinDir string
	// SbinDir holds slurmctld, slurmd, slurmrestd, munged; default /usr/sbin.
	SbinDir string
	// Debug is SlurmctldDebug/SlurmdDebug; default "verbose".
	Debug string
	// SlurmdDelay is how long StartSlurmd waits before starting slurmd. A
	// slurmd that registers in the same second as its resume request can
	// leave the node "still waiting for boot" until ResumeTimeout; default
	// 2 s, negative for none.
	SlurmdDelay time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; default 2 s.
	StopGrace time.Duration
	// Logger receives the harness's own log; default slog.Default().
	Logger *slog.Logger
	// Slurm is the installation to run; default SelectedSlurm() (BURST_SLURM).
	Slurm *Slurm
	// Binds are host directories that processes of a Debian root must see
	// at their own path (e.g. burst's binaries, which slurmctld runs as
	// hooks); os.TempDir() and the run dir always are.
	Binds []string
	// User is the ordinary account (not root, not SlurmUser) that Sbatch
	// submits jobs as, made by EnsureUser and added to the Slurm root; it
	// owns work/. Default DefaultUser.
	User string
}

// Cluster is a running private Slurm cluster.
type Cluster struct {
	opts     Options
	log      *slog.Logger
	slurm    Slurm
	env      *Env
	client   string // ClientBin
	id       string
	name     string
	dir      string
	hostname string
	ipBin    string

	net         Network
	subnetClaim string
	record      string
	bridgeMade  bool
	ctldPort    int
	slurmdPort  int
	mungeSocket string
	restSocket  string
	restPort    int

	munged, slurmctld, slurmrestd *proc

	user User // Options.User: who Sbatch submits as

	mu      sync.Mutex
	jobs    []Job               // submitted through Sbatch*, with Slurm's owner
	ips     map[netip.Addr]bool // allocated (AllocIP or bound)
	bound   map[netip.Addr]bool // used by a node
	nextIP  int                 // the host number AllocIP tries first
	nodes   map[string]*Node
	stopped bool
	stopErr error
}

// Node is a node namespace and the processes the harness runs in it.
type Node struct {
	Name  string
	IP    netip.Addr
	netns string
	veth  string
	procs []*proc
}

// Netns returns the path of the node's network namespace (/run/netns/NAME),
// for `nsenter --net=PATH`.
func (n *Node) Netns() string { return filepath.Join(netnsDir, n.netns) }

// runRecord is written to /run/bst-harness/<id>.json for CleanupStale.
type runRecord struct {
	ID          string `json:"id"`
	PID         int    `json:"pid"`
	StartTime   uint64 `json:"start_time"`
	Dir         string `json:"dir"`
	Conf        string `json:"conf"`
	Bridge      string `json:"bridge"`
	SubnetClaim string `json:"subnet_claim"`
	// a Slurm root's namespace (Env): its anchor and mount namespace
	AnchorPID   int    `json:"anchor_pid,omitempty"`
	AnchorStart uint64 `json:"anchor_start,omitempty"`
	MntNS       string `json:"mnt_ns,omitempty"`
}

// Start brings a cluster up: run dir, munge key and munged, bridge,
// slurm.conf and gres.conf, fake GPU devices, slurmctld (answering ping) and,
// if asked, slurmrestd. ctx bounds the start-up only. On error everything
// made so far is removed. Must run as root.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("starting slurm harness: must run as root (namespaces, bridge, munged, slurmd)")
	}
	o := opts
	if o.GPUs == 0 {
		o.GPUs = 8
	}
	if o.BinDir == "" {
		o.BinDir = "/usr/bin"
	}
	if o.SbinDir == "" {
		o.SbinDir = "/usr/sbin"
	}
	if o.Debug == "" {
		o.Debug = "verbose"
	}
	if o.SlurmdDelay == 0 {
		o.SlurmdDelay = 2 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.GresConf == "" {
		o.GresConf = "AutoDetect=off\n"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var sl Slurm
	if o.Slurm != nil {
		sl = *o.Slurm
	} else {
		var err error
		if sl, err = SelectedSlurm(); err != nil {
			return nil, fmt.Errorf("starting slurm harness: %w", err)
		}
	}
	for _, b := range []string{o.BinDir + "/scontrol", o.BinDir + "/sinfo", o.BinDir + "/squeue", o.BinDir + "/sbatch",
		o.SbinDir + "/slurmctld", o.SbinDir + "/slurmd", o.SbinDir + "/munged"} {
		if _, err := os.Stat(sl.Path(b)); err != nil {
			return nil, fmt.Errorf("starting slurm harness: %s missing from %s; install the Debian packages slurmctld slurmd slurm-client munge slurmrestd (make deps)", b, sl)
		}
	}
	if _, err := os.Stat("/usr/bin/nsenter"); err != nil {
		return nil, errors.New("starting slurm harness: /usr/bin/nsenter missing; install util-linux")
	}
	ipBin, err := findIP()
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading hostname: %w", err)
	}
	host, _, _ = strings.Cut(host, ".")
	id := randomID()
	c := &Cluster{
		opts: o, id: id, name: o.Name, hostname: host, ipBin: ipBin, slurm: sl,
		log:   o.Logger.With("harness", id),
		ips:   map[netip.Addr]bool{},
		bound: map[netip.Addr]bool{},
		nodes: map[string]*Node{},
	}
	if c.name == "" {
		c.name = Prefix + id
	}
	if err := c.start(ctx); err != nil {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up after failed start: %w", serr))
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	t0 := time.Now()
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", stateDir, err)
	}
	dir, err := os.MkdirTemp(c.opts.BaseDir, Prefix+"-"+c.id+"-")
	if err != nil {
		return fmt.Errorf("creating run dir: %w", err)
	}
	c.dir = dir
	// munged requires every directory above its socket to be o+x.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("chmod run dir: %w", err)
	}
	st, _ := procStartTime(os.Getpid())
	c.net.Bridge = Prefix + c.id + "br"
	c.record = filepath.Join(stateDir, c.id+".json")
	rec, _ := json.Marshal(runRecord{ID: c.id, PID: os.Getpid(), StartTime: st, Dir: dir, Conf: c.ConfPath(), Bridge: c.net.Bridge})
	if err := os.WriteFile(c.record, rec, 0o644); err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}
	prefix, claim, err := claimSubnet(c.id)
	if err != nil {
		return err
	}
	c.subnetClaim = claim
	c.net.Prefix = prefix
	gw := prefix.Addr().As4()
	gw[3] = 1
	c.net.Gateway = netip.AddrFrom4(gw)
	rec, _ = json.Marshal(runRecord{ID: c.id, PID: os.Getpid(), StartTime: st, Dir: dir, Conf: c.ConfPath(), Bridge: c.net.Bridge, SubnetClaim: claim})
	if err := os.WriteFile(c.record, rec, 0o644); err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}

	for _, d := range []string{"etc", "state", "spool", "log", "run", "dev", "work", "munge/key", "munge/run", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("creating run dir layout: %w", err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "munge/key"), 0o700); err != nil {
		return err
	}
	for i := range c.opts.GPUs {
		p := filepath.Join(c.DevDir(), fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(devNum(195, uint32(i)))); err != nil {
			return fmt.Errorf("creating fake GPU device %s (mknod c 195 %d): %w", p, i, err)
		}
	}

	if c.env, err = c.slurm.Enter(ctx, EnvOptions{ID: c.id, Binds: append([]string{filepath.Dir(dir)}, c.opts.Binds...),
		MountDir: filepath.Join(dir, "root"), LogPath: filepath.Join(dir, "log", "anchor.log"), Environ: c.Environ()}); err != nil {
		return err
	}
	if err := c.writeClientBin(); err != nil {
		return err
	}
	if err := c.setupUser(ctx); err != nil {
		return err
	}
	if err := c.startMunge(ctx); err != nil {
		return err
	}
	if err := c.setupBridge(ctx); err != nil {
		return err
	}
	if c.ctldPort, err = FreePort(""); err != nil {
		return err
	}
	if c.slurmdPort, err = FreePort(""); err != nil {
		return err
	}
	if c.opts.Prepare != nil {
		if err := c.opts.Prepare(c); err != nil {
			return fmt.Errorf("running Options.Prepare: %w", err)
		}
	}
	if c.opts.RestJWT {
		if err := c.writeJWTKey(); err != nil {
			return err
		}
	}
	frag := c.expand(c.opts.Fragment)
	if c.opts.Plain {
		if err := os.WriteFile(c.ConfPath(), []byte(c.plainConf(frag)), 0o644); err != nil {
			return fmt.Errorf("writing slurm.conf: %w", err)
		}
	} else {
		if err := os.WriteFile(c.FragmentPath(), []byte(frag), 0o644); err != nil {
			return fmt.Errorf("writing slurm.conf fragment: %w", err)
		}
		if err := os.WriteFile(c.ConfPath(), []byte(c.baseConf(frag)), 0o644); err != nil {
			return fmt.Errorf("writing slurm.conf: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "etc", "gres.conf"), []byte(c.expand(c.opts.GresConf)), 0o644); err != nil {
			return fmt.Errorf("writing gres.conf: %w", err)
		}
	}
	if c.opts.Setup != nil {
		if err := c.opts.Setup(c); err != nil {
			return fmt.Errorf("running Options.Setup: %w", err)
		}
	}

	c.slurmctld, err = c.startProc("slurmctld", filepath.Join(dir, "log", "slurmctld.stdout"), c.Environ(), "",
		c.opts.SbinDir+"/slurmctld", "-D", "-c", "-f", c.ConfPath())
	if err != nil {
		return err
	}
	if err := c.waitPing(ctx); err != nil {
		return err
	}
	if c.opts.RestAPI || c.opts.RestJWT {
		if err := c.startRest(ctx); err != nil {
			return err
		}
	}
	c.log.Info("slurm cluster up", "slurm", c.slurm.String(), "dir", dir, "conf", c.ConfPath(), "bridge", c.net.Bridge,
		"subnet", c.net.Prefix, "ctld_port", c.ctldPort, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// Stop tears everything down, also after a failed test: slurmrestd,
// slurmctld, nodes (their processes, anything in their namespaces, the
// namespaces and veths), every process whose environment carries this run's
// SLURM_CONF (slurmstepd, job steps, hook scripts), munged, the bridge, the
// run record and (unless KeepDir) the run dir. It is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return c.stopErr
	}
	c.stopped = true
	c.mu.Unlock()
	t0 := time.Now()
	var errs []error
	stopAll(c.opts.StopGrace, c.slurmrestd, c.slurmctld)
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, name := range c.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.StopNode(name); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.dir != "" {
		var list []int
		for _, pid := range pidsWithEnv("SLURM_CONF=" + c.ConfPath()) {
			if (c.munged == nil || pid != c.munged.cmd.Process.Pid) && (c.env == nil || pid != c.env.AnchorPID()) {
				list = append(list, pid)
			}
		}
		if len(list) > 0 {
			c.log.Info("killing leftover processes of this cluster", "pids", list)
			if err := killPids(list); err != nil {
				errs = append(errs, err)
			}
		}
	}
	stopAll(c.opts.StopGrace, c.munged)
	if c.env != nil {
		if err := c.env.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.bridgeMade {
		if err := c.ip(context.Background(), "link", "del", c.net.Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if c.dir != "" && !c.opts.KeepDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing run dir: %w", err))
		}
	}
	for _, f := range []string{c.subnetClaim, c.record} {
		if f != "" {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	c.stopErr = errors.Join(errs...)
	c.log.Info("slurm cluster stopped", "took", time.Since(t0).Round(time.Millisecond), "err", c.stopErr)
	return c.stopErr
}

func devNum(major, minor uint32) uint64 {
	return uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}

// FreePort asks the kernel for a free TCP port on host ("" for every
// address); it is free when asked: bind it soon.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
