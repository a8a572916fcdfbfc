package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/burst-hpc/burst/internal/capacity"
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
	v.gpuHealth()
	v.finite(reflect.ValueOf(*c), "")
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
		case capacity.Spot, capacity.OnDemand, capacity.SpotThenOnDemand:
		case "":
			v.add(path+".capacity", "required: spot, on-demand or spot-then-on-demand")
		default:
			v.add(path+".capacity", "%q: want spot, on-demand or spot-then-on-demand", cl.Capacity)
		}
		v.classTypes(cat, path, cl, modelOK)
		v.classZones(path, cl, zonesWithSubnet)
		for j, f := range cl.Features {
			if !featureRe.MatchString(f) {
				v.add(fmt.Sprintf("%s.features[%d]", path, j), "%q: Slurm features are letters, digits, _ . - only", f)
			}
		}
		if cl.MemoryHeadroomMiB < 0 {
			v.add(path+".memory_headroom_mib", "must not be negative")
		}
		validateReservations(v, path+".reservations", cl.Reservations)
		if cl.SpotAllocationStrategy == "" {
			cl.SpotAllocationStrategy = capacity.DefaultSpotStrategy
		} else if !slices.Contains(capacity.SpotStrategies, cl.SpotAllocationStrategy) {
			v.add(path+".spot_allocation_strategy", "%q is not an EC2 Fleet spot allocation strategy; one of %s (default %s)",
				cl.SpotAllocationStrategy, strings.Join(capacity.SpotStrategies, ", "), capacity.DefaultSpotStrategy)
		}
	}
}

// classTypes checks a class's instance types against the catalog.
func (v *validator) classTypes(cat *catalog.Catalog, path string, cl *Class, modelOK bool) {
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
}

// classZones checks a class's zones have subnets, or gives the class every
// zone with a subnet.
func (v *validator) classZones(path string, cl *Class, zonesWithSubnet []string) {
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
