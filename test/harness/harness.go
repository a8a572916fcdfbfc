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
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
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

	mu      sync.Mutex
	ips     map[netip.Addr]bool // allocated (AllocIP or bound)
	bound   map[netip.Addr]bool // used by a node
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
	if err := c.startMunge(ctx); err != nil {
		return err
	}
	if err := c.setupBridge(ctx); err != nil {
		return err
	}
	if c.ctldPort, err = freePort(); err != nil {
		return err
	}
	if c.slurmdPort, err = freePort(); err != nil {
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

func devNum(major, minor uint32) uint64 {
	return uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("finding a free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) startMunge(ctx context.Context) error {
	key := filepath.Join(c.dir, "munge/key/munge.key")
	if out, err := c.env.Command(ctx, "", c.dir, c.opts.SbinDir+"/mungekey", "--create", "--keyfile="+key, "--bits=1024").CombinedOutput(); err != nil {
		c.log.Debug("mungekey failed, using random bytes", "err", err, "out", string(out))
		b := make([]byte, 128)
		_, _ = rand.Read(b)
		if err := os.WriteFile(key, b, 0o600); err != nil {
			return fmt.Errorf("writing munge key: %w", err)
		}
	}
	if err := os.Chmod(key, 0o600); err != nil {
		return err
	}
	c.mungeSocket = filepath.Join(c.dir, "munge/run/munge.sock")
	var err error
	c.munged, err = c.startProc("munged", filepath.Join(c.dir, "log", "munged.stdout"), c.Environ(), "",
		c.opts.SbinDir+"/munged", "--foreground", "--key-file="+key, "--socket="+c.mungeSocket,
		"--pid-file="+filepath.Join(c.dir, "munge/run/munged.pid"),
		"--seed-file="+filepath.Join(c.dir, "munge/key/munged.seed"),
		"--log-file="+filepath.Join(c.dir, "munge/key/munged.log"))
	if err != nil {
		return err
	}
	return c.waitFor(ctx, 10*time.Second, "munged socket", c.munged, filepath.Join(c.dir, "munge/key/munged.log"), func() bool {
		fi, err := os.Stat(c.mungeSocket)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	})
}

func (c *Cluster) startRest(ctx context.Context) error {
	c.restSocket = filepath.Join(c.dir, "run", "slurmrestd.sock")
	env := c.Environ()
	auth := "rest_auth/local"
	if c.opts.RestJWT {
		auth = "rest_auth/jwt"
		// without it slurmrestd talks to slurmctld through auth/munge, which
		// rejects every passed-on token ("Rejecting thread config token")
		env = append(env, "SLURM_JWT=daemon")
	}
	argv := []string{c.opts.SbinDir + "/slurmrestd", "-f", c.ConfPath(), "-a", auth, "-s", c.slurm.RestPlugin()}
	if c.slurm.Version == "22.05" {
		// slurmrestd refuses to run as root unless told it is a test
		env = append(env, "SLURMRESTD_SECURITY=disable_user_check")
	} else {
		// 26.05 refuses that too: run it as nobody, as a site would run it
		// as an unprivileged user; rest_auth/local still sees the client
		// (root) through the socket's peer credentials
		rest := filepath.Join(c.dir, "run", "rest")
		if err := os.Mkdir(rest, 0o755); err != nil {
			return err
		}
		if err := os.Chown(rest, 65534, 65534); err != nil { // nobody:nogroup in Debian
			return err
		}
		c.restSocket = filepath.Join(rest, "slurmrestd.sock")
		argv = append([]string{"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"}, argv...)
	}
	argv = append(argv, "unix:"+c.restSocket)
	if c.opts.RestJWT {
		var err error
		if c.restPort, err = freePort(); err != nil {
			return err
		}
		argv = append(argv, net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort)))
	}
	var err error
	c.slurmrestd, err = c.startProc("slurmrestd", filepath.Join(c.dir, "log", "slurmrestd.log"), env, "", argv...)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, 10*time.Second, "slurmrestd socket", c.slurmrestd, filepath.Join(c.dir, "log", "slurmrestd.log"), func() bool {
		if _, err := os.Stat(c.restSocket); err != nil {
			return false
		}
		if c.restPort == 0 {
			return true
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort)), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// writeJWTKey writes the HS256 key slurmctld verifies tokens with
// (Options.RestJWT): 32 random bytes, as Slurm's JWT guide makes them.
func (c *Cluster) writeJWTKey() error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(c.JWTKeyPath(), key, 0o600); err != nil {
		return fmt.Errorf("writing the JWT key: %w", err)
	}
	return nil
}

// JWTKeyPath is the HS256 key of auth/jwt (Options.RestJWT), in
// StateSaveLocation, mode 0600, owned by SlurmUser (root).
func (c *Cluster) JWTKeyPath() string { return filepath.Join(c.dir, "state", "jwt_hs256.key") }

// RestURL is slurmrestd's TCP address on the bridge, "http://10.x.y.1:PORT"
// ("" unless Options.RestJWT).
func (c *Cluster) RestURL() string {
	if c.restPort == 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(c.net.Gateway.String(), fmt.Sprint(c.restPort))
}

// waitFor polls cond every 50 ms until true, p exits, limit passes or ctx ends.
func (c *Cluster) waitFor(ctx context.Context, limit time.Duration, what string, p *proc, logPath string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if cond() {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("waiting for %s: %s exited (%v); last log lines of %s:\n%s", what, p.name, p.err, logPath, tail(logPath, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; last log lines of %s:\n%s", what, ctx.Err(), logPath, tail(logPath, 15))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitPing(ctx context.Context) error {
	return c.waitFor(ctx, 30*time.Second, "slurmctld to answer scontrol ping", c.slurmctld, c.SlurmctldLog(), func() bool {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := c.Run(pctx, "scontrol", "ping")
		return err == nil && strings.Contains(out, "is UP")
	})
}

// ID is the run's random id, part of every name the run makes.
func (c *Cluster) ID() string { return c.id }

// Name is the ClusterName.
func (c *Cluster) Name() string { return c.name }

// Dir is the run dir: etc/ (slurm.conf, fragment.conf, gres.conf), log/,
// state/, spool/, run/, dev/, work/ (cwd of Run), munge/.
func (c *Cluster) Dir() string { return c.dir }

// ConfPath is the generated slurm.conf.
func (c *Cluster) ConfPath() string { return filepath.Join(c.dir, "etc", "slurm.conf") }

// FragmentPath is the Included copy of Options.Fragment.
func (c *Cluster) FragmentPath() string { return filepath.Join(c.dir, "etc", "fragment.conf") }

// GresConfPath is the generated gres.conf.
func (c *Cluster) GresConfPath() string { return filepath.Join(c.dir, "etc", "gres.conf") }

// DevDir holds the fake GPU devices nvidia0..N-1 (for gres.conf File=).
func (c *Cluster) DevDir() string { return filepath.Join(c.dir, "dev") }

// SlurmctldLog is slurmctld's log file.
func (c *Cluster) SlurmctldLog() string { return filepath.Join(c.dir, "log", "slurmctld.log") }

// SlurmdLog is the slurmd log file of node.
func (c *Cluster) SlurmdLog(node string) string {
	return filepath.Join(c.dir, "log", "slurmd-"+node+".log")
}

// MungeSocket is the private munged socket.
func (c *Cluster) MungeSocket() string { return c.mungeSocket }

// RestSocket is slurmrestd's unix socket ("" unless Options.RestAPI).
func (c *Cluster) RestSocket() string { return c.restSocket }

// RestClient returns an HTTP client whose every request goes to slurmrestd's
// socket: client.Get("http://slurm/slurm/" + c.Slurm().RestVersion() + "/jobs").
func (c *Cluster) RestClient() *http.Client {
	sock := c.restSocket
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// Network returns the bridge and subnet of this run.
func (c *Cluster) Network() Network { return c.net }

// ControllerAddr is slurmctld's address (the bridge address).
func (c *Cluster) ControllerAddr() netip.Addr { return c.net.Gateway }

// Ports returns SlurmctldPort and SlurmdPort.
func (c *Cluster) Ports() (slurmctld, slurmd int) { return c.ctldPort, c.slurmdPort }

// Env is what a Slurm client needs to talk to this cluster: SLURM_CONF=...
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.ConfPath()} }

// Environ is this process's environment without any SLURM_* variable, plus
// Env() and a PATH with the Slurm binaries: the environment of every
// process the harness starts.
func (c *Cluster) Environ() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "SLURM_") || strings.HasPrefix(e, "PATH=") {
			continue
		}
		env = append(env, e)
	}
	return append(env, "PATH="+c.opts.SbinDir+":"+c.opts.BinDir+":/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF="+c.ConfPath())
}

// Command returns an exec.Cmd for a Slurm client (name relative to BinDir,
// or an absolute path) with Environ() and Dir()/work as working directory
// (where sbatch puts slurm-N.out). It runs where the cluster's Slurm runs
// (inside a Debian root's namespace), so absolute paths are paths there:
// burst's binaries too (they call the root's scontrol).
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if !filepath.IsAbs(name) {
		name = filepath.Join(c.opts.BinDir, name)
	}
	cmd := c.env.Command(ctx, "", filepath.Join(c.dir, "work"), append([]string{name}, args...)...)
	cmd.Env = c.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// NodeCommand is Command inside node name's network namespace (argv[0] an
// absolute path), for one-off commands; NodeExec runs daemons.
func (c *Cluster) NodeCommand(ctx context.Context, name string, argv ...string) (*exec.Cmd, error) {
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("running in node %s: node not started (StartNode first)", name)
	}
	cmd := c.env.Command(ctx, n.Netns(), filepath.Join(c.dir, "work"), argv...)
	cmd.Env = c.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// Slurm is the installation the cluster runs.
func (c *Cluster) Slurm() Slurm { return c.slurm }

// RootEnv is where the cluster's Slurm processes run (see Env).
func (c *Cluster) RootEnv() *Env { return c.env }

// ClientBin is a directory of Slurm clients (scontrol, squeue, sinfo,
// sbatch, scancel, ...) that host-side code runs, e.g. as
// slurm.ScontrolOptions.BinDir: BinDir for the host's Slurm, else wrappers
// that run the root's clients inside the cluster's namespace.
func (c *Cluster) ClientBin() string { return c.client }

// slurmClients are the programs ClientBin wraps (those the root has).
var slurmClients = []string{"sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "scrontab",
	"sdiag", "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger"}

func (c *Cluster) writeClientBin() error {
	if c.slurm.Host() {
		c.client = c.opts.BinDir
		return nil
	}
	c.client = filepath.Join(c.dir, "slurm-bin")
	if err := os.MkdirAll(c.client, 0o755); err != nil {
		return err
	}
	for _, name := range slurmClients {
		prog := filepath.Join(c.opts.BinDir, name)
		if _, err := os.Stat(c.slurm.Path(prog)); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(c.client, name), []byte(c.env.Wrapper(prog, filepath.Join(c.dir, "work"))), 0o755); err != nil {
			return fmt.Errorf("writing client wrapper: %w", err)
		}
	}
	return nil
}

// startProc starts a long-running process of the cluster where its Slurm
// runs (in node namespace netns unless ""), working directory the run dir.
func (c *Cluster) startProc(name, logPath string, env []string, netns string, argv ...string) (*proc, error) {
	return startProc(name, logPath, env, c.dir, c.env.Argv(netns, c.dir, argv...)...)
}

// Run runs a Slurm client and returns its stdout; the error carries the
// command line and stderr.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := c.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Sbatch submits a batch job (sbatch --parsable ARGS) and returns its id.
func (c *Cluster) Sbatch(ctx context.Context, args ...string) (string, error) {
	out, err := c.Run(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if id == "" {
		return "", fmt.Errorf("sbatch %s: no job id in output %q", strings.Join(args, " "), out)
	}
	return id, nil
}

var terminalJobStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}

// JobState returns a job's JobState from scontrol (e.g. PENDING, RUNNING,
// COMPLETED) and its Reason.
func (c *Cluster) JobState(ctx context.Context, jobID string) (state, reason string, err error) {
	out, err := c.Run(ctx, "scontrol", "show", "job", "-o", jobID)
	if err != nil {
		return "", "", err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			state = v
		}
		if v, ok := strings.CutPrefix(f, "Reason="); ok {
			reason = v
		}
	}
	if state == "" {
		return "", "", fmt.Errorf("reading state of job %s: no JobState in %q", jobID, out)
	}
	return state, reason, nil
}

// WaitJobState polls (every 200 ms) until the job is in one of states and
// returns it. It fails early when the job ends in a state not wanted, and
// when ctx ends (the error then includes the last state and reason).
func (c *Cluster) WaitJobState(ctx context.Context, jobID string, states ...string) (string, error) {
	var last, reason string
	for {
		st, r, err := c.JobState(ctx, jobID)
		if err == nil {
			last, reason = st, r
			if slices.Contains(states, st) {
				return st, nil
			}
			if slices.Contains(terminalJobStates, st) {
				return st, fmt.Errorf("waiting for job %s to be %v: it ended %s (reason %s); see %s", jobID, states, st, r, c.SlurmctldLog())
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for job %s to be %v: %w (last state %q reason %q); see %s", jobID, states, ctx.Err(), last, reason, c.SlurmctldLog())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// NodeState returns sinfo's compact state of a node, e.g. "idle~", "mix",
// "alloc#", "down~".
func (c *Cluster) NodeState(ctx context.Context, name string) (string, error) {
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-n", name, "-o", "%T")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", fmt.Errorf("reading state of node %s: sinfo printed nothing (unknown node?)", name)
	}
	return f[0], nil
}

// WaitNodeState polls (every 200 ms) until NodeState is one of states.
func (c *Cluster) WaitNodeState(ctx context.Context, name string, states ...string) (string, error) {
	var last string
	for {
		if st, err := c.NodeState(ctx, name); err == nil {
			last = st
			if slices.Contains(states, st) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for node %s to be %v: %w (last state %q); see %s", name, states, ctx.Err(), last, c.SlurmctldLog())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StartNode creates node name's network namespace (veth on the bridge,
// address ip/24; the zero ip means AllocIP) and runs argv in it through
// `nsenter --net=/run/netns/NS` in a new session with an empty signal mask,
// Environ() and output to <dir>/log/node-<name>.out. It is an error if the
// node is already running; use NodeExec to add processes.
func (c *Cluster) StartNode(ctx context.Context, name string, ip netip.Addr, argv ...string) (*Node, error) {
	n, err := c.addNode(ctx, name, ip)
	if err != nil {
		return nil, err
	}
	if len(argv) > 0 {
		if err := c.NodeExec(ctx, name, argv...); err != nil {
			_ = c.StopNode(name)
			return nil, err
		}
	}
	return n, nil
}

func (c *Cluster) addNode(ctx context.Context, name string, ip netip.Addr) (*Node, error) {
	if name == "" || strings.ContainsAny(name, "/ \t\n\x00") || len(name) > 200 {
		return nil, fmt.Errorf("starting node %q: invalid node name", name)
	}
	c.mu.Lock()
	_, exists := c.nodes[name]
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("starting node %s: cluster stopped", name)
	}
	if exists {
		return nil, fmt.Errorf("starting node %s: already running (StopNode first)", name)
	}
	if !ip.IsValid() {
		var err error
		if ip, err = c.AllocIP(); err != nil {
			return nil, fmt.Errorf("starting node %s: %w", name, err)
		}
	}
	if err := c.bindIP(ip); err != nil {
		return nil, fmt.Errorf("starting node %s: %w", name, err)
	}
	c.mu.Lock()
	if _, ok := c.nodes[name]; ok || c.stopped {
		c.mu.Unlock()
		c.releaseIP(ip)
		return nil, fmt.Errorf("starting node %s: already running or cluster stopped", name)
	}
	n := &Node{Name: name, IP: ip, netns: c.netnsName(name), veth: fmt.Sprintf("%s%sv%d", Prefix, c.id, ip.As4()[3])}
	c.nodes[name] = n
	c.mu.Unlock()
	if err := c.setupNodeNet(ctx, n); err != nil {
		_ = c.StopNode(name)
		return nil, err
	}
	c.log.Info("node namespace up", "node", name, "ip", ip, "netns", n.netns)
	return n, nil
}

// NodeExec starts another process inside a running node's namespace.
func (c *Cluster) NodeExec(ctx context.Context, name string, argv ...string) error {
	if len(argv) == 0 {
		return fmt.Errorf("running in node %s: empty command", name)
	}
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("running in node %s: node not started (StartNode first)", name)
	}
	p, err := c.startProc(name+":"+filepath.Base(argv[0]), filepath.Join(c.dir, "log", "node-"+name+".out"), c.Environ(), n.Netns(), argv...)
	if err != nil {
		return fmt.Errorf("running in node %s: %w", name, err)
	}
	c.mu.Lock()
	n.procs = append(n.procs, p)
	c.mu.Unlock()
	return nil
}

// StartSlurmd boots node name as a cloud node would: after Options.SlurmdDelay
// (default 2 s; it blocks for that long) it creates the node's namespace at
// ip (zero: AllocIP) and runs `slurmd -D -b -N name -f slurm.conf` there.
// Its signature suits an external boot hook (e.g. the EC2 emulator's
// instance start); run it in a goroutine to boot asynchronously.
func (c *Cluster) StartSlurmd(ctx context.Context, name string, ip netip.Addr) (*Node, error) {
	if c.opts.SlurmdDelay > 0 {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("starting slurmd for %s: %w", name, ctx.Err())
		case <-time.After(c.opts.SlurmdDelay):
		}
	}
	// slurmd otherwise logs "Domain socket directory ... No such file" first.
	if err := os.MkdirAll(filepath.Join(c.dir, "spool", name), 0o755); err != nil {
		return nil, fmt.Errorf("starting slurmd for %s: %w", name, err)
	}
	return c.StartNode(ctx, name, ip, c.opts.SbinDir+"/slurmd", "-D", "-b", "-N", name, "-f", c.ConfPath())
}

// StopNode stops a node: SIGTERM then SIGKILL to its processes, SIGKILL to
// anything else in its namespace, then deletes the namespace and veth and
// releases its address. Stopping an unknown node is not an error.
func (c *Cluster) StopNode(name string) error {
	c.mu.Lock()
	n, ok := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	stopAll(c.opts.StopGrace, n.procs...)
	err := c.deleteNetns(n.netns, n.veth)
	c.releaseIP(n.IP)
	if err != nil {
		return fmt.Errorf("stopping node %s: %w", name, err)
	}
	c.log.Info("node stopped", "node", name)
	return nil
}

// Nodes returns the names of the nodes running now, sorted.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for n := range c.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Node returns a running node.
func (c *Cluster) Node(name string) (*Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	return n, ok
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
