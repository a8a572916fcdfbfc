package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
)

var (
	clusterNameRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	regionRe      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	classNameRe   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)
	slurmVerRe    = regexp.MustCompile(`^(\d{2})\.(\d{2})(\.\d{1,4})?$`)
	partitionRe   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	trailingNumRe = regexp.MustCompile(`-[0-9]+$`)
	featureRe     = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	accountRE     = regexp.MustCompile(`^[0-9]{12}$`)
	slurmNameRe   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$`)
)

// Validate checks the whole configuration against itself and the catalog
// and returns every problem (as Problems), or nil. It fills in derived
// defaults (a class's zones default to every zone with a subnet).
func (c *Config) Validate() error { return c.ValidateWith(catalog.Default()) }

// ValidateWith is Validate against a given catalog.
func (c *Config) ValidateWith(cat *catalog.Catalog) error {
	v := &validator{c: c}
	v.cluster()
	v.slurm()
	v.classes(cat)
	v.network()
	v.image()
	v.fsx()
	v.sizer()
	v.agentTeardown()
	v.warm()
	v.interruptions()
	v.budgets()
	v.limits()
	v.accounting()
	v.log()
	if len(v.probs) > 0 {
		sortProblems(v.probs)
		return v.probs
	}
	return nil
}

type validator struct {
	c     *Config
	probs Problems
}

func (v *validator) add(path, format string, args ...any) {
	// the nearest recorded ancestor's line when the path itself is absent
	line, p := 0, path
	for p != "" {
		if l := v.c.Line(p); l > 0 {
			line = l
			break
		}
		if i := strings.LastIndexAny(p, ".["); i > 0 {
			p = p[:i]
		} else {
			break
		}
	}
	v.probs = append(v.probs, Problem{Source: v.c.Source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) abs(path, val string, required bool) {
	if val == "" {
		if required {
			v.add(path, "required: give an absolute path")
		}
		return
	}
	if !filepath.IsAbs(val) {
		v.add(path, "%q is not an absolute path (Slurm runs burst with no working directory you control)", val)
	}
}

func (v *validator) positive(path string, d Duration) {
	if d.Duration <= 0 {
		v.add(path, "must be a positive duration, got %s", d.Duration)
	}
}

func (v *validator) cluster() {
	c := v.c.Cluster
	if c.Name == "" {
		v.add("cluster.name", "required: a short name such as ml-prod (tags every instance)")
	} else if !clusterNameRe.MatchString(c.Name) {
		v.add("cluster.name", "%q must be lower-case letters, digits and dashes, starting with a letter, at most 40 characters", c.Name)
	}
	if c.Region == "" {
		v.add("cluster.region", "required: an AWS region such as us-east-1")
	} else if !regionRe.MatchString(c.Region) {
		v.add("cluster.region", "%q is not an AWS region name (e.g. us-east-1)", c.Region)
	}
	if c.EC2Endpoint != "" {
		if u, err := url.Parse(c.EC2Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("cluster.ec2_endpoint", "%q is not an http(s) URL", c.EC2Endpoint)
		}
	}
	if c.EC2StaticCredentials && c.EC2Endpoint == "" {
		v.add("cluster.ec2_static_credentials", "dummy credentials only work with an EC2 emulator: set cluster.ec2_endpoint to its URL, or remove this key to use the AWS credential chain")
	}
}

func (v *validator) slurm() {
	s := v.c.Slurm
	v.slurmAPI()
	v.abs("slurm.bin_dir", s.BinDir, true)
	v.abs("slurm.sbin_dir", s.SbinDir, true)
	v.abs("slurm.conf_dir", s.ConfDir, true)
	v.abs("slurm.burst_bin", s.BurstBin, true)
	v.abs("slurm.gpu_devices", s.GresFiles, s.GresAutodetect == "off")
	if s.Controller == "" {
		v.add("slurm.controller", "required: the address burst nodes use to reach slurmctld")
	}
	if s.ControllerPort < 1 || s.ControllerPort > 65535 {
		v.add("slurm.controller_port", "%d is not a TCP port", s.ControllerPort)
	}
	if s.NodeConf != "configless" && !filepath.IsAbs(s.NodeConf) {
		v.add("slurm.node_conf", "%q: want configless or the absolute path of slurm.conf on the nodes", s.NodeConf)
	}
	if !strings.HasPrefix(s.MungeKeySource, "file:///") && !strings.HasPrefix(s.MungeKeySource, "arn:aws:secretsmanager:") {
		v.add("slurm.munge_key_source", "%q: want a Secrets Manager secret ARN (arn:aws:secretsmanager:...) or file:///path baked into the image", s.MungeKeySource)
	}
	v.abs("slurm.munge_key_path", s.MungeKeyPath, true)
	v.abs("slurm.munge_socket", s.MungeSocket, true)
	if s.NodeConf == "configless" && s.MungeSocket != "/run/munge/munge.socket.2" {
		v.add("slurm.munge_socket", "a configless node fetches slurm.conf through munge's default socket; keep /run/munge/munge.socket.2 or use a shared slurm.conf (node_conf: /path)")
	}
	if s.Version != "" {
		if m := slurmVerRe.FindStringSubmatch(s.Version); m == nil {
			v.add("slurm.version", "%q: want a Slurm release such as 24.11 or 24.11.5 (or leave it out to ask scontrol --version)", s.Version)
		} else if m[1] < "22" || m[1] == "22" && m[2] < "05" {
			v.add("slurm.version", "Slurm %s is older than 22.05, the oldest release burst supports", s.Version)
		}
	}
	if s.GresAutodetect != "nvml" && s.GresAutodetect != "off" {
		v.add("slurm.gres_autodetect", "%q: want nvml (real GPUs) or off (device files listed from gpu_devices)", s.GresAutodetect)
	}
	v.positive("slurm.resume_timeout", s.ResumeTimeout)
	v.positive("slurm.suspend_timeout", s.SuspendTimeout)
	if s.SuspendTime.Duration < 0 {
		v.add("slurm.suspend_time", "must not be negative")
	}
	if s.ResumeRate < 0 {
		v.add("slurm.resume_rate", "must be 0 (unlimited) or more, got %d", s.ResumeRate)
	}
	if s.SuspendRate < 0 {
		v.add("slurm.suspend_rate", "must be 0 (unlimited) or more, got %d", s.SuspendRate)
	}
	if s.TreeWidth < 1 || s.TreeWidth > 65533 {
		v.add("slurm.tree_width", "must be between 1 and 65533, got %d", s.TreeWidth)
	}
	if len(s.Partitions) == 0 {
		v.add("slurm.partitions", "required: at least one partition for burst's nodes, e.g. [{name: gpu, default: true}]")
	}
	seen, defaults := map[string]bool{}, 0
	for i, p := range s.Partitions {
		path := fmt.Sprintf("slurm.partitions[%d]", i)
		if !partitionRe.MatchString(p.Name) {
			v.add(path+".name", "%q is not a valid partition name", p.Name)
		}
		if seen[p.Name] {
			v.add(path+".name", "partition %q is listed twice", p.Name)
		}
		seen[p.Name] = true
		if p.Default {
			defaults++
		}
		if _, err := p.MaxTimeDuration(); err != nil {
			v.add(path+".max_time", "%v", err)
		}
		for j, cl := range p.Classes {
			if _, ok := v.c.Class(cl); !ok {
				v.add(fmt.Sprintf("%s.classes[%d]", path, j), "no class named %q (classes: %s)", cl, v.classNames())
			}
		}
	}
	if defaults > 1 {
		v.add("slurm.partitions", "%d partitions are marked default; Slurm allows one", defaults)
	}
}

func (v *validator) classNames() string {
	var n []string
	for _, c := range v.c.Classes {
		n = append(n, c.Name)
	}
	if len(n) == 0 {
		return "none defined"
	}
	return strings.Join(n, ", ")
}

func (v *validator) classes(cat *catalog.Catalog) {
	if len(v.c.Classes) == 0 {
		v.add("classes", "required: at least one node class")
	}
	seen := map[string]bool{}
	zonesWithSubnet := make([]string, 0, len(v.c.Network.Subnets))
	for z := range v.c.Network.Subnets {
		zonesWithSubnet = append(zonesWithSubnet, z)
	}
	sort.Strings(zonesWithSubnet)
	models := cat.GPUModels()
	for i := range v.c.Classes {
		cl := &v.c.Classes[i]
		path := fmt.Sprintf("classes[%d]", i)
		switch {
		case cl.Name == "":
			v.add(path+".name", "required: a short lower-case name; nodes are called <name>-1, <name>-2, ...")
		case !classNameRe.MatchString(cl.Name) || strings.HasSuffix(cl.Name, "-") || trailingNumRe.MatchString(cl.Name):
			v.add(path+".name", "%q must be lower-case letters, digits and dashes, start with a letter, at most 31 characters, and not end in -<number> (node names append -<n>)", cl.Name)
		case seen[cl.Name]:
			v.add(path+".name", "class %q is defined twice", cl.Name)
		}
		seen[cl.Name] = true
		modelOK := false
		for _, m := range models {
			modelOK = modelOK || m == cl.GPUModel
		}
		if cl.GPUModel == "" {
			v.add(path+".gpu_model", "required: one of %s", strings.Join(models, ", "))
		} else if !modelOK {
			v.add(path+".gpu_model", "%q is not an NVIDIA GPU model in the catalog; one of %s", cl.GPUModel, strings.Join(models, ", "))
		}
		if cl.GPUsPerNode < 1 {
			v.add(path+".gpus_per_node", "must be at least 1, got %d", cl.GPUsPerNode)
		}
		if cl.MaxNodes < 1 {
			v.add(path+".max_nodes", "must be at least 1, got %d", cl.MaxNodes)
		} else if cl.MaxNodes > 10000 {
			v.add(path+".max_nodes", "%d is more nodes than one class should hold (at most 10000)", cl.MaxNodes)
		}
		switch cl.Capacity {
		case CapacitySpot, CapacityOnDemand, CapacitySpotThenOnDemand:
		case "":
			v.add(path+".capacity", "required: spot, on-demand or spot-then-on-demand")
		default:
			v.add(path+".capacity", "%q: want spot, on-demand or spot-then-on-demand", cl.Capacity)
		}
		if len(cl.InstanceTypes) == 0 {
			v.add(path+".instance_types", "required: a list of EC2 instance types, or [any] for every catalog type with the class's GPU model and count")
		}
		for j, it := range cl.InstanceTypes {
			ip := fmt.Sprintf("%s.instance_types[%d]", path, j)
			if it == AnyInstanceType {
				if len(cl.InstanceTypes) > 1 {
					v.add(ip, "%q cannot be combined with named types", AnyInstanceType)
				} else if modelOK && cl.GPUsPerNode > 0 && len(cl.Candidates(cat)) == 0 {
					v.add(ip, "no catalog type has exactly %d x %s", cl.GPUsPerNode, cl.GPUModel)
				}
				continue
			}
			t, ok := cat.Lookup(it)
			switch {
			case !ok:
				v.add(ip, "%q is not in the GPU catalog", it)
			case !t.NVIDIA():
				v.add(ip, "%s has %s accelerators; burst schedules NVIDIA GPUs", it, t.GPUManufacturer)
			case modelOK && t.GPUModel != cl.GPUModel:
				v.add(ip, "%s has %s GPUs, but the class declares gpu_model %s", it, t.GPUModel, cl.GPUModel)
			case cl.GPUsPerNode > 0 && t.GPUs != cl.GPUsPerNode:
				v.add(ip, "%s has %d GPUs, but the class declares gpus_per_node %d", it, t.GPUs, cl.GPUsPerNode)
			case !t.HasPrice():
				v.add(ip, "%s has no published on-demand price in the catalog; burst cannot rank it", it)
			}
		}
		if len(cl.Zones) == 0 {
			cl.Zones = append([]string(nil), zonesWithSubnet...)
			if len(cl.Zones) == 0 {
				v.add(path+".zones", "no subnet for class %s: add network.subnets.<zone>: subnet-... (or list zones here)", cl.Name)
			}
		} else {
			for j, z := range cl.Zones {
				if _, ok := v.c.Network.Subnets[z]; !ok {
					v.add(fmt.Sprintf("%s.zones[%d]", path, j), "no subnet for zone %q: add it under network.subnets", z)
				}
			}
		}
		for j, f := range cl.Features {
			if !featureRe.MatchString(f) {
				v.add(fmt.Sprintf("%s.features[%d]", path, j), "%q: Slurm features are letters, digits, _ . - only", f)
			}
		}
		if cl.MemoryHeadroomMiB < 0 {
			v.add(path+".memory_headroom_mib", "must not be negative")
		}
	}
}

// Candidates returns the class's candidate instance types from the catalog
// (expanding "any"), cheapest first. Unknown names are skipped (Validate
// reports them).
func (cl *Class) Candidates(cat *catalog.Catalog) []catalog.InstanceType {
	if len(cl.InstanceTypes) == 1 && cl.InstanceTypes[0] == AnyInstanceType {
		return cat.Matching(catalog.Shape{GPUModel: cl.GPUModel, GPUs: cl.GPUsPerNode, ExactGPUs: true})
	}
	var out []catalog.InstanceType
	for _, n := range cl.InstanceTypes {
		if t, ok := cat.Lookup(n); ok {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].OnDemandUSD < out[j].OnDemandUSD })
	return out
}

func (v *validator) network() {
	n := v.c.Network
	for z, s := range n.Subnets {
		if !strings.HasPrefix(z, v.c.Cluster.Region) {
			v.add("network.subnets."+z, "zone %q is not in region %s", z, v.c.Cluster.Region)
		}
		if !strings.HasPrefix(s, "subnet-") {
			v.add("network.subnets."+z, "%q is not a subnet ID (subnet-...)", s)
		}
	}
	for i, g := range n.SecurityGroups {
		if !strings.HasPrefix(g, "sg-") {
			v.add(fmt.Sprintf("network.security_groups[%d]", i), "%q is not a security group ID (sg-...)", g)
		}
	}
}

func (v *validator) image() {
	im := v.c.Image
	switch {
	case im.AMI == "" && im.LaunchTemplate == "":
		v.add("image", "give image.ami (built with `make image`) or image.launch_template")
	case im.AMI != "" && im.LaunchTemplate != "":
		v.add("image", "give image.ami or image.launch_template, not both")
	case im.AMI != "" && !strings.HasPrefix(im.AMI, "ami-"):
		v.add("image.ami", "%q is not an AMI ID (ami-...)", im.AMI)
	}
}

func (v *validator) fsx() {
	f := v.c.FSx
	if (f.DNSName == "") != (f.MountName == "") {
		v.add("fsx", "give both fsx.dns_name and fsx.mount_name, or neither")
	}
	v.abs("fsx.mount_point", f.MountPoint, true)
	v.abs("fsx.local_dir", f.LocalDir, false)
	if filepath.IsAbs(f.CheckpointDir) || strings.Contains(f.CheckpointDir, "..") {
		v.add("fsx.checkpoint_dir", "%q must be a relative path under fsx.mount_point", f.CheckpointDir)
	}
}

func (v *validator) sizer() {
	s := v.c.Sizer
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		v.add("sizer.listen", "%q is not host:port", s.Listen)
	}
	switch u, err := url.Parse(s.URL); {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add("sizer.url", "%q is not an https URL", s.URL)
	case u.Scheme != "https":
		v.add("sizer.url", "%q: the sizer serves HTTPS only (bearer tokens never cross the network in clear); write https:// and run `burst-sizer tls init`", s.URL)
	}
	v.abs("sizer.tls.ca_file", s.TLS.CAFile, true)
	v.abs("sizer.tls.cert_file", s.TLS.CertFile, false)
	v.abs("sizer.tls.key_file", s.TLS.KeyFile, false)
	v.abs("sizer.tls.ca_key_file", s.TLS.CAKeyFile, false)
	for i, h := range s.TLS.Hosts {
		if h == "" || strings.ContainsAny(h, " /:") && net.ParseIP(h) == nil {
			v.add(fmt.Sprintf("sizer.tls.hosts[%d]", i), "%q is not a host name or IP address", h)
		}
	}
	v.abs("sizer.identity_cert", s.IdentityCert, true)
	if s.Account != "" && !accountRE.MatchString(s.Account) {
		v.add("sizer.account", "%q is not a 12-digit AWS account id", s.Account)
	}
	if s.CredentialTTL.Duration < 5*time.Minute || s.CredentialTTL.Duration > 7*24*time.Hour {
		v.add("sizer.credential_ttl", "%s is outside 5m..168h", s.CredentialTTL.Duration)
	}
	if s.MetricsListen != "" {
		host, _, err := net.SplitHostPort(s.MetricsListen)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			v.add("sizer.metrics_listen", "%q: plain-HTTP metrics listen on a loopback host:port only (127.0.0.1:9472); scrape the HTTPS listener with the read-only credential otherwise", s.MetricsListen)
		}
	}
	v.abs("sizer.token_file", s.TokenFile, true)
	v.abs("sizer.state_dir", s.StateDir, true)
	v.positive("sizer.timeout", s.Timeout)
	v.positive("sizer.reconcile_interval", s.ReconcileInterval)
	if n := v.c.Sizing.LearnAfterRuns; n < 1 || n > 1000 {
		v.add("sizing.learn_after_runs", "must be between 1 and 1000, got %d", n)
	}
}

func (v *validator) agentTeardown() {
	a := v.c.Agent
	v.positive("agent.report_interval", a.ReportInterval)
	v.positive("agent.imds_poll", a.IMDSPoll)
	v.positive("agent.checkpoint_grace", a.CheckpointGrace)
	v.positive("agent.dead_man_after", a.DeadManAfter)
	switch a.GPUSource {
	case "nvml", "sim":
	default:
		v.add("agent.gpu_source", "%q: want nvml (real GPUs) or sim (simulated: demo and tests only)", a.GPUSource)
	}
	if p := a.SimMemoryPercent; p < 0 || p > 100 {
		v.add("agent.sim_memory_percent", "must be between 0 and 100, got %d", p)
	} else if p > 0 && a.GPUSource != "sim" {
		v.add("agent.sim_memory_percent", "applies only with agent.gpu_source: sim")
	}
	if v.c.Sizer.AcceptSimulatedGPUs && a.GPUSource != "sim" {
		v.add("sizer.accept_simulated_gpus", "is for test stacks whose agents simulate GPUs (agent.gpu_source: sim); production learns from NVML only")
	}
	if a.CheckpointGrace.Seconds() >= 110 {
		v.add("agent.checkpoint_grace", "%s leaves no time to requeue before EC2 reclaims the instance (2 minutes after the notice); keep it under 110s", a.CheckpointGrace.Duration)
	}
	if v.c.Teardown.WarmReuse.Duration < 0 {
		v.add("teardown.warm_reuse", "must not be negative")
	}
	if v.c.Teardown.RequeueHold.Duration < 0 {
		v.add("teardown.requeue_hold", "must not be negative (0 releases a requeued job's surviving nodes at once)")
	}
}

func (v *validator) warm() {
	w := v.c.Warm
	v.positive("warm.interval", w.Interval)
	v.positive("warm.half_life", w.HalfLife)
	v.positive("warm.lead_time", w.LeadTime)
	if !(w.Quantile > 0 && w.Quantile < 1) {
		v.add("warm.quantile", "%v: want a share between 0 and 1, e.g. 0.95", w.Quantile)
	}
	if !(w.ProfileWeight >= 0 && w.ProfileWeight <= 1) {
		v.add("warm.profile_weight", "%v: want a number from 0 (recent rate only) to 1 (hour-of-week profile only)", w.ProfileWeight)
	}
	capped := false
	for i, cl := range v.c.Classes {
		switch {
		case math.IsNaN(cl.WarmUSDPerDay) || math.IsInf(cl.WarmUSDPerDay, 0) || cl.WarmUSDPerDay < 0:
			v.add(fmt.Sprintf("classes[%d].warm_usd_per_day", i), "%v: want US dollars per day >= 0 (0 keeps no node of the class warm)", cl.WarmUSDPerDay)
		case cl.WarmUSDPerDay > 0:
			capped = true
		}
	}
	if w.Enabled && !capped && len(v.c.Classes) > 0 {
		v.add("warm.enabled", "no class has a warm pool: set classes[].warm_usd_per_day on the classes to keep warm")
	}
}

func (v *validator) budgets() {
	seen := map[string]bool{}
	for i, b := range v.c.Budgets {
		path := fmt.Sprintf("budgets[%d]", i)
		if b.Account == "" {
			v.add(path+".account", "budget without an account: name the Slurm account it caps")
		} else if seen[b.Account] {
			v.add(path+".account", "account %q has two budgets; keep one", b.Account)
		}
		seen[b.Account] = true
		if b.MonthlyUSD <= 0 {
			v.add(path+".monthly_usd", "must be a positive amount of US dollars, got %v", b.MonthlyUSD)
		}
		switch b.OnUnknown {
		case "", OnUnknownHold, OnUnknownAllow:
		default:
			v.add(path+".on_unknown", "%q: want hold (the account's jobs wait while its spend cannot be known) or allow", b.OnUnknown)
		}
	}
}

func (v *validator) limits() {
	seen := map[[2]string]bool{}
	for i, l := range v.c.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		if l.Account == "" && l.User == "" {
			v.add(path, "a limit needs an account, a user, or both")
		}
		k := [2]string{l.Account, l.User}
		if seen[k] && (l.Account != "" || l.User != "") {
			v.add(path, "a second limit for account %q user %q; keep one", l.Account, l.User)
		}
		seen[k] = true
		if l.MaxGPUs < 0 {
			v.add(path+".max_gpus", "must not be negative, got %d", l.MaxGPUs)
		}
		if l.MaxNodes < 0 {
			v.add(path+".max_nodes", "must not be negative, got %d", l.MaxNodes)
		}
		if l.MaxGPUs == 0 && l.MaxNodes == 0 {
			v.add(path, "limits nothing: set max_gpus, max_nodes or both")
		}
		for _, f := range [][2]string{{"account", l.Account}, {"user", l.User}} {
			if f[1] != "" && !slurmNameRe.MatchString(f[1]) {
				v.add(path+"."+f[0], "%q is not a Slurm %s name", f[1], f[0])
			}
		}
	}
}

func (v *validator) accounting() {
	a := v.c.Accounting
	switch a.IdleOwner {
	case "launching-job", "pool":
	default:
		v.add("accounting.idle_owner", "%q: want launching-job (the job the instance was launched for pays for its boot and idle time) or pool (the class's pool account)", a.IdleOwner)
	}
	v.positive("accounting.default_time_limit", a.DefaultTimeLimit)
}

func (v *validator) log() {
	switch v.c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q: want debug, info, warn or error", v.c.Log.Level)
	}
	if v.c.Log.File != "-" {
		v.abs("log.file", v.c.Log.File, true)
	}
}
