// Package config is the burst.yaml schema: defaults, a strict loader (unknown
// keys are errors) and one Validate that reports every problem with its YAML
// path and line.
//
// Load order: Default(), then the YAML file (strict), then environment
// overrides (ApplyEnv), then Validate.
package config

import (
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
)

// AnyInstanceType in a class's instance_types means "every catalog type with
// the class's GPU shape".
const AnyInstanceType = "any"

// Config is the whole of burst.yaml.
type Config struct {
	Cluster  Cluster  `yaml:"cluster"`
	Slurm    Slurm    `yaml:"slurm"`
	Classes  []Class  `yaml:"classes"`
	Network  Network  `yaml:"network"`
	Image    Image    `yaml:"image"`
	FSx      FSx      `yaml:"fsx"`
	Sizer    Sizer    `yaml:"sizer"`
	Sizing   Sizing   `yaml:"sizing"`
	Agent    Agent    `yaml:"agent"`
	Teardown Teardown `yaml:"teardown"`
	Warm     Warm     `yaml:"warm"`
	// Interruptions: EventBridge notices from SQS (interruptions.go).
	Interruptions Interruptions `yaml:"interruptions"`
	Budgets       []Budget      `yaml:"budgets"`
	// Limits cap the burst GPUs and nodes an account or user holds at once.
	Limits     []Limit    `yaml:"limits"`
	Accounting Accounting `yaml:"accounting"`
	Log        Log        `yaml:"log"`
	// GPUHealth is burst-agent's GPU health monitor (gpuhealth.go).
	GPUHealth GPUHealth `yaml:"gpu_health"`

	// Source is the file the configuration was loaded from ("" for defaults).
	Source string `yaml:"-"`
	lines  map[string]int
}

// Cluster names the cluster and where it runs.
type Cluster struct {
	Name   string `yaml:"name"`   // value of the burst:cluster tag on every instance; [a-z0-9-], 1-40 chars
	Region string `yaml:"region"` // AWS region, e.g. us-east-1
	// EC2Endpoint overrides the EC2 API endpoint (the built-in emulator in the
	// demo and tests; a VPC endpoint in production). Empty: the SDK default.
	EC2Endpoint string `yaml:"ec2_endpoint"`
	// EC2StaticCredentials signs EC2 calls with fixed dummy credentials
	// instead of the AWS credential chain: for the built-in EC2 emulator
	// (demo and tests), which checks none. Test only; needs ec2_endpoint.
	EC2StaticCredentials bool `yaml:"ec2_static_credentials"`
}

// Slurm says where Slurm is and which partitions burst owns.
type Slurm struct {
	// API is how burst's controller-side programs (resume, suspend, the
	// prolog and epilog, burst-sizer's reconciler) talk to Slurm: "cli"
	// (scontrol, squeue, sinfo of bin_dir; the default) or "rest"
	// (slurmrestd with JWT, see Rest). burst-agent on the nodes uses its
	// own flags (the command line by default).
	API        string `yaml:"api"`
	Rest       Rest   `yaml:"rest"`
	BinDir     string `yaml:"bin_dir"`    // scontrol, squeue, sinfo; called by absolute path
	SbinDir    string `yaml:"sbin_dir"`   // slurmd on nodes
	ConfDir    string `yaml:"conf_dir"`   // where slurm.conf, burst.conf, gres.conf, cli_filter.lua live
	Controller string `yaml:"controller"` // address nodes use to reach slurmctld
	// ControllerPort is SlurmctldPort (default 6817).
	ControllerPort int `yaml:"controller_port"`
	// NodeConf is how slurmd on a node finds slurm.conf: "configless"
	// (fetched from slurmctld; needs SlurmctldParameters=enable_configless)
	// or the absolute path of a slurm.conf on the node (a shared file system).
	NodeConf string `yaml:"node_conf"`
	// MungeKeySource is where nodes get the munge key: a Secrets Manager
	// secret ARN, or file:///path for a key baked into the image.
	MungeKeySource string `yaml:"munge_key_source"`
	// MungeKeyPath and MungeSocket are where nodes keep the key and run
	// munged (Debian's defaults; only a shared slurm.conf can move the socket).
	MungeKeyPath string      `yaml:"munge_key_path"`
	MungeSocket  string      `yaml:"munge_socket"`
	BurstBin     string      `yaml:"burst_bin"`   // where burst-resume etc. are installed
	Partitions   []Partition `yaml:"partitions"`  // partitions burst owns
	GresFiles    string      `yaml:"gpu_devices"` // GPU device path prefix for gres.conf File= (default /dev/nvidia)
	// GresAutodetect: "nvml" (real nodes) or "off" (File= lines, for fake devices).
	GresAutodetect string `yaml:"gres_autodetect"`
	// Version is the Slurm release burst-slurm-conf writes for
	// ("24.11", "24.11.5"); empty: ask `<bin_dir>/scontrol --version`.
	Version string `yaml:"version"`

	ResumeTimeout  Duration `yaml:"resume_timeout"`
	SuspendTimeout Duration `yaml:"suspend_timeout"`
	// SuspendTime is only a safety net: burst releases nodes at job end.
	SuspendTime Duration `yaml:"suspend_time"`
	ResumeRate  int      `yaml:"resume_rate"`  // nodes per minute, 0 = unlimited
	SuspendRate int      `yaml:"suspend_rate"` // nodes per minute, 0 = unlimited
	TreeWidth   int      `yaml:"tree_width"`
	// PrologWait makes PrologSlurmctld wait for the job's nodes so Slurm
	// launches the batch job as soon as they register (not on its 30 s pass).
	PrologWait bool `yaml:"prolog_wait"`
	// SetNodeAddr makes burst-resume tell Slurm each node's address; off when
	// cloud_reg_addrs lets registration do it.
	SetNodeAddr bool `yaml:"set_node_addr"`
	// CliFilter enables submission-time sizing through cli_filter.lua.
	CliFilter bool `yaml:"cli_filter"`
}

// Rest is how burst reaches slurmrestd (slurm.api: rest).
type Rest struct {
	// URL is slurmrestd's address: https://host:port (with CAFile) or
	// unix:/path/to/slurmrestd.socket. Every request carries a SlurmUser
	// token, so plain http:// is refused, except to a loopback address
	// with InsecureLoopback.
	URL string `yaml:"url"`
	// CAFile is the PEM file of the CA (or CAs) that signed slurmrestd's
	// certificate: required with https://, nothing else is trusted (not
	// the system roots).
	CAFile string `yaml:"ca_file"`
	// InsecureLoopback allows http:// to a loopback address
	// (http://127.0.0.1:6820, http://[::1]:6820): the token then crosses
	// no network, but any local process that can sniff loopback sees it.
	// Refused for any other address.
	InsecureLoopback bool `yaml:"insecure_loopback"`
	// User is the Slurm user burst acts as (X-SLURM-USER-NAME, the tokens'
	// sun): SlurmUser, root or a Slurm administrator, since burst updates
	// nodes and requeues other users' jobs. Required with jwt_key_file; with
	// token_file the token's own user is the default.
	User string `yaml:"user"`
	// JWTKeyFile is slurm.conf's AuthAltParameters=jwt_key=... file: burst
	// mints short-lived tokens from it (mode 0600, owned by SlurmUser).
	JWTKeyFile string `yaml:"jwt_key_file"`
	// TokenFile holds a token someone else renews (`scontrol token
	// username=slurm lifespan=...`), re-read when it changes. Exactly one
	// of jwt_key_file and token_file.
	TokenFile string `yaml:"token_file"`
	// TokenLifetime is how long each minted token is valid (default 5m).
	TokenLifetime Duration `yaml:"token_lifetime"`
	// Fallback is what does what a release's REST API cannot (22.05: node
	// updates; before 26.05: requeue): "cli" (the command-line tools of
	// bin_dir, the default) or "none" (those operations fail, saying so).
	Fallback string `yaml:"fallback"`
}

// Partition is a Slurm partition burst owns.
type Partition struct {
	Name    string   `yaml:"name"`
	Default bool     `yaml:"default"`
	Classes []string `yaml:"classes"` // empty: all classes
	MaxTime string   `yaml:"max_time"`
}

// Class is a pool of identical-enough cloud nodes.
type Class struct {
	Name          string        `yaml:"name"`
	GPUModel      string        `yaml:"gpu_model"`
	GPUsPerNode   int           `yaml:"gpus_per_node"`
	MaxNodes      int           `yaml:"max_nodes"`
	InstanceTypes []string      `yaml:"instance_types"` // or ["any"]
	Capacity      capacity.Type `yaml:"capacity"`
	Zones         []string      `yaml:"zones"` // availability zones; each needs a subnet
	// SpotAllocationStrategy is the EC2 Fleet spot allocation strategy of
	// the class's spot launches (default price-capacity-optimized, AWS's
	// recommendation). Only capacity-optimized-prioritized honours the
	// sizer's ranking across instance types in one fleet; under the others
	// burst launches one fleet per instance type, in rank order, and EC2
	// picks the zone.
	SpotAllocationStrategy string `yaml:"spot_allocation_strategy"`
	// Reservations are On-Demand Capacity Reservations the class launches
	// into before anything else.
	Reservations Reservations `yaml:"reservations"`
	// PlacementGroup for multi-node jobs of this class (cluster strategy).
	PlacementGroup string   `yaml:"placement_group"`
	Features       []string `yaml:"features"` // extra Slurm features
	// MemoryHeadroomMiB is kept back from the smallest candidate's memory
	// for the OS and daemons when declaring RealMemory.
	MemoryHeadroomMiB int `yaml:"memory_headroom_mib"`
	// WarmUSDPerDay is the hard cap on what this class's warm pool (nodes
	// kept up with no job, see Warm) may cost a day; 0 keeps none warm.
	WarmUSDPerDay float64 `yaml:"warm_usd_per_day"`
}

// Reservations names a class's On-Demand Capacity Reservations (ODCRs).
// Each launch tries them first (a prepaid reservation costs nothing more to
// use), targeting them explicitly, whether their instance matching is open
// or targeted; when they are full the class's capacity order follows
// (spot, on-demand), or nothing with Only.
type Reservations struct {
	// IDs are capacity reservation ids (cr-...): burst describes them
	// (DescribeCapacityReservations) and uses the active ones whose type and
	// zone the class has.
	IDs []string `yaml:"ids"`
	// ResourceGroupARN is a resource group of reservations
	// (arn:aws:resource-groups:<region>:<account>:group/<name>): launches
	// target the group, for each of the class's ranked types and zones.
	ResourceGroupARN string `yaml:"resource_group_arn"`
	// Only: launch into the reservations or not at all (no spot, no
	// on-demand); a full reservation leaves the job pending.
	Only bool `yaml:"only"`
	// CapacityBlocks are Capacity Blocks for ML the class launches into
	// while each is active (tried first, before the ODCRs): prepaid
	// windows of reserved instances, see CapacityBlock.
	CapacityBlocks []CapacityBlock `yaml:"capacity_blocks"`
}

// CapacityBlock is one Capacity Block for ML. burst describes it
// (DescribeCapacityReservations, ReservationType capacity-block: its window
// and state), launches into it only while it is active and only jobs whose
// time limit ends before EC2 starts reclaiming it (30 minutes before its
// end), and checkpoints and requeues what still runs then.
type CapacityBlock struct {
	// ID is the block's capacity reservation id (cr-...).
	ID string `yaml:"id"`
	// PriceUSD is what the block cost (the purchase's upfront fee, as
	// `aws ec2 describe-capacity-block-offerings` or the console showed
	// it): the ledger bills it once, whole, as EC2 does. Required: EC2
	// does not describe a bought block's price.
	PriceUSD float64 `yaml:"price_usd"`
}

// Any reports whether the class names any reservation.
func (r Reservations) Any() bool {
	return len(r.IDs) > 0 || r.ResourceGroupARN != "" || len(r.CapacityBlocks) > 0
}

// BlockIDs are the ids of the class's Capacity Blocks.
func (r Reservations) BlockIDs() []string {
	out := make([]string, 0, len(r.CapacityBlocks))
	for _, b := range r.CapacityBlocks {
		out = append(out, b.ID)
	}
	return out
}

// Network is where instances go.
type Network struct {
	Subnets        map[string]string `yaml:"subnets"` // availability zone -> subnet ID
	SecurityGroups []string          `yaml:"security_groups"`
}

// Image is what instances boot.
type Image struct {
	AMI             string `yaml:"ami"`
	LaunchTemplate  string `yaml:"launch_template"`
	InstanceProfile string `yaml:"instance_profile"`
	KeyName         string `yaml:"key_name"`
}

// FSx is the FSx for Lustre file system nodes mount.
type FSx struct {
	DNSName    string `yaml:"dns_name"`
	MountName  string `yaml:"mount_name"`
	MountPoint string `yaml:"mount_point"`
	// CheckpointDir is the checkpoint root under the mount point.
	CheckpointDir string `yaml:"checkpoint_dir"`
	// LocalDir replaces the Lustre mount with a local directory (demo, tests).
	LocalDir string `yaml:"local_dir"`
}

// Sizer is the burst-sizer daemon.
type Sizer struct {
	Listen string `yaml:"listen"` // address serve listens on
	URL    string `yaml:"url"`    // how resume and agents reach it
	// URLs are more sizers on the same PostgreSQL (sizer.store): burst-resume,
	// burst-suspend, the hooks and the CLI try url, then these, and stay
	// with the one that answers.
	URLs      []string `yaml:"urls"`
	TokenFile string   `yaml:"token_file"` // admin bearer token, 0600
	StateDir  string   `yaml:"state_dir"`  // SQLite database, caches
	Timeout   Duration `yaml:"timeout"`    // client timeout for rank calls from resume
	// ReconcileInterval is how often serve compares instances with Slurm.
	ReconcileInterval Duration `yaml:"reconcile_interval"`
	// TLS is the sizer's HTTPS material (the API is HTTPS only).
	TLS SizerTLS `yaml:"tls"`
	// IdentityCert is the PEM certificate that verifies EC2 instance
	// identity documents: AWS's published RSA-2048 certificate of
	// cluster.region (the emulator's own in the demo and tests).
	IdentityCert string `yaml:"identity_cert"`
	// Account is the AWS account id the nodes' identity documents must
	// name; empty: any (the cluster tag and EC2 check still apply).
	Account string `yaml:"account"`
	// CredentialTTL is how long a node credential lasts (nodes renew at half).
	CredentialTTL Duration `yaml:"credential_ttl"`
	// MetricsListen, when set, serves /metrics in plain HTTP without a
	// token on this loopback address; otherwise scrape the HTTPS listener
	// with the read-only credential (<token_file>.read).
	MetricsListen string `yaml:"metrics_listen"`
	// AcceptSimulatedGPUs makes the sizer learn from simulated GPU reports
	// (burst-agent --gpu-source sim). Test stacks only: production learns
	// from NVML readings alone.
	AcceptSimulatedGPUs bool `yaml:"accept_simulated_gpus"`
	// RouteAuth is how the sizer knows the user behind a route request made
	// with the world-readable route credential: "munge" (the default: the
	// user's MUNGE credential, decoded through slurm.munge_socket on the
	// head node; a user routes only their own jobs) or "token" (the
	// request's user is taken as claimed).
	RouteAuth string `yaml:"route_auth"`
	// Store is the sizer's database (default: SQLite in state_dir).
	Store SizerStore `yaml:"store"`
}

// SizerTLS locates the sizer's CA and server certificate. `burst-sizer tls
// init` writes all four; an admin with a CA of their own sets them instead.
type SizerTLS struct {
	// CAFile is the CA certificate every client pins (public, 0644).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the server certificate and key; default
	// <state_dir>/tls/server.pem and server.key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// CAKeyFile is the CA's key (only tls init uses it); default <state_dir>/tls/ca.key.
	CAKeyFile string `yaml:"ca_key_file"`
	// Hosts are the server certificate's DNS names and IP addresses;
	// default: the hosts of sizer.url and sizer.listen.
	Hosts []string `yaml:"hosts"`
}

// CertPath is sizer.tls.cert_file or its default.
func (s Sizer) CertPath() string {
	return orDefault(s.TLS.CertFile, filepath.Join(s.StateDir, "tls", "server.pem"))
}

// KeyPath is sizer.tls.key_file or its default.
func (s Sizer) KeyPath() string {
	return orDefault(s.TLS.KeyFile, filepath.Join(s.StateDir, "tls", "server.key"))
}

// CAKeyPath is sizer.tls.ca_key_file or its default.
func (s Sizer) CAKeyPath() string {
	return orDefault(s.TLS.CAKeyFile, filepath.Join(s.StateDir, "tls", "ca.key"))
}

// CertHosts are the names the server certificate must carry.
func (s Sizer) CertHosts() []string {
	if len(s.TLS.Hosts) > 0 {
		return s.TLS.Hosts
	}
	var out []string
	if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
		out = append(out, u.Hostname())
	}
	if h, _, err := net.SplitHostPort(s.Listen); err == nil && h != "" && h != "0.0.0.0" && h != "::" && (len(out) == 0 || out[0] != h) {
		out = append(out, h)
	}
	return out
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// Sizing tunes the sizing decision.
type Sizing struct {
	// RewriteExplicit lets the sizer replace what a user asked for
	// explicitly (--gres/--gpus, --nodes, --partition) with a cheaper plan
	// that fits. Off (the default): the cheaper plan is only suggested.
	RewriteExplicit bool `yaml:"rewrite_explicit"`
	// LearnAfterRuns is how many measured runs of a recurring job it takes
	// before the sizer sizes it down from what they used (default 2).
	LearnAfterRuns int `yaml:"learn_after_runs"`
}

// Agent configures burst-agent on nodes.
type Agent struct {
	ReportInterval Duration `yaml:"report_interval"`
	IMDSPoll       Duration `yaml:"imds_poll"`
	// CheckpointGrace bounds the wait for a job to checkpoint after a spot
	// interruption notice (EC2 gives 2 minutes).
	CheckpointGrace Duration `yaml:"checkpoint_grace"`
	// DeadManAfter terminates a node's own instance after it has been down
	// in Slurm or cut off from the controller this long.
	DeadManAfter Duration `yaml:"dead_man_after"`
	// IMDSEndpoint overrides the instance metadata endpoint (the EC2
	// emulator in the demo and tests); empty in production.
	IMDSEndpoint string `yaml:"imds_endpoint"`
	// GPUSource is where burst-agent reads GPUs: nvml (the default; a
	// node whose NVML fails is drained with the reason) or sim (simulated
	// GPUs: the demo and the tests, whose sizer sets accept_simulated_gpus).
	GPUSource string `yaml:"gpu_source"`
	// SimMemoryPercent fixes the GPU memory simulated GPUs show a job
	// using, in percent (tests of learning); 0 follows the utilisation.
	SimMemoryPercent int `yaml:"sim_memory_percent"`
}

// Teardown says when nodes go away.
type Teardown struct {
	ReleaseOnCompletion bool     `yaml:"release_on_completion"`
	WarmReuse           Duration `yaml:"warm_reuse"` // hand a finished node to a waiting job within this window
	// RequeueHold keeps the surviving nodes of a job burst requeued after a
	// spot interruption (or another lost node) powered up for its relaunch
	// this long, so that only the lost node is replaced; 0 releases them.
	RequeueHold Duration `yaml:"requeue_hold"`
}

// Warm is the forecast-driven warm pool (internal/warmpool/forecast): burst-sizer serve
// forecasts each class's node demand from the jobs it has seen (learned
// state kept in sizer.state_dir/warm-forecast.json across restarts) and keeps
// that many nodes powered up with no job, within each class's
// warm_usd_per_day, so that jobs start without a boot.
type Warm struct {
	Enabled bool `yaml:"enabled"`
	// Interval is how often serve re-plans every class.
	Interval Duration `yaml:"interval"`
	// Quantile of one lead time's Poisson node demand kept warm.
	Quantile float64 `yaml:"quantile"`
	// FixedQuantile keeps Quantile whatever the pool misses; by default a
	// class whose jobs find no warm node more often than 1-quantile has its
	// quantile raised by that factor (internal/warmpool/forecast).
	FixedQuantile bool `yaml:"fixed_quantile"`
	// HalfLife of the recent arrival rate.
	HalfLife Duration `yaml:"half_life"`
	// ProfileWeight of the hour-of-week profile against the recent rate
	// (0: recent rate only; 1: profile only).
	ProfileWeight float64 `yaml:"profile_weight"`
	// LeadTime is how long a replacement node takes: one boot.
	LeadTime Duration `yaml:"lead_time"`
}

// Budget caps one Slurm account's monthly spend. The cap is hard: a job of
// the account launches only when the month's spend, plus what the
// account's running jobs have reserved, plus this job's reservation (the
// price of the launch times its time limit) fits under it.
type Budget struct {
	Account    string  `yaml:"account"`
	MonthlyUSD float64 `yaml:"monthly_usd"`
	// OnUnknown is what happens to the account's jobs when burst cannot
	// know its spend (the sizer down and its state database unreadable):
	// "hold" (default) or "allow".
	OnUnknown string `yaml:"on_unknown"`
}

// The on_unknown choices of a budget.
const (
	OnUnknownHold  = "hold"
	OnUnknownAllow = "allow"
)

// Limit caps what one account, one user, or one user within one account
// holds at once on burst nodes: GPUs and nodes of running and starting
// jobs. Jobs over it wait, held with the reason, and start as others end.
type Limit struct {
	Account  string `yaml:"account"` // "" with user: the user in every account
	User     string `yaml:"user"`    // "": every user of the account together
	MaxGPUs  int    `yaml:"max_gpus"`
	MaxNodes int    `yaml:"max_nodes"`
}

// Accounting says who pays for what.
type Accounting struct {
	// IdleOwner is who pays for an instance's time no job runs on it (boot,
	// idle, the warm-reuse window, EC2's 60 s minimum): "launching-job"
	// (default: the job the instance was launched for, its account and
	// user) or "pool" (the class's pool account, "pool:<class>").
	IdleOwner string `yaml:"idle_owner"`
	// DefaultTimeLimit is the time a budget reservation assumes for a job
	// without a time limit (default 4h).
	DefaultTimeLimit Duration `yaml:"default_time_limit"`
}

// Log is where burst writes structured logs.
type Log struct {
	File  string `yaml:"file"`
	Level string `yaml:"level"` // debug, info, warn, error
}

// Default returns the defaults every burst.yaml starts from.
func Default() *Config {
	return &Config{
		Cluster: Cluster{Region: "us-east-1"},
		Slurm: Slurm{
			API: "cli", Rest: Rest{TokenLifetime: D(5 * time.Minute), Fallback: "cli"},
			BinDir: "/usr/bin", SbinDir: "/usr/sbin", ConfDir: "/etc/slurm", BurstBin: "/usr/local/bin",
			GresFiles: "/dev/nvidia", GresAutodetect: "nvml",
			ResumeTimeout: D(10 * time.Minute), SuspendTimeout: D(2 * time.Minute), SuspendTime: D(time.Hour),
			TreeWidth: 65533, PrologWait: true, CliFilter: true,
			ControllerPort: 6817, NodeConf: "configless", MungeKeySource: "file:///etc/munge/munge.key",
			MungeKeyPath: "/etc/munge/munge.key", MungeSocket: "/run/munge/munge.socket.2",
		},
		FSx: FSx{MountPoint: "/fsx", CheckpointDir: "checkpoints"},
		Sizer: Sizer{Listen: "127.0.0.1:8472", URL: "https://127.0.0.1:8472", TokenFile: "/etc/burst/sizer.token", StateDir: "/var/lib/burst", Timeout: D(2 * time.Second), ReconcileInterval: D(30 * time.Second),
			TLS: SizerTLS{CAFile: "/etc/burst/sizer-ca.pem"}, IdentityCert: "/etc/burst/ec2-identity.pem", CredentialTTL: D(time.Hour), RouteAuth: "munge"},
		Sizing:     Sizing{LearnAfterRuns: 2},
		Agent:      Agent{GPUSource: "nvml", ReportInterval: D(30 * time.Second), IMDSPoll: D(2 * time.Second), CheckpointGrace: D(90 * time.Second), DeadManAfter: D(15 * time.Minute)},
		Teardown:   Teardown{ReleaseOnCompletion: true, WarmReuse: D(2 * time.Minute), RequeueHold: D(2 * time.Minute)},
		Warm:       Warm{Interval: D(time.Minute), Quantile: 0.95, HalfLife: D(30 * time.Minute), ProfileWeight: 0.5, LeadTime: D(2 * time.Minute)},
		Accounting: Accounting{IdleOwner: "launching-job", DefaultTimeLimit: D(4 * time.Hour)},
		Log:        Log{File: "/var/log/burst/burst.log", Level: "info"},

		Interruptions: Interruptions{AgentWait: D(10 * time.Second), ScheduledPoll: D(5 * time.Minute)},
	}
}
