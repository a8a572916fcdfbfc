// Package slurmconf writes Slurm's side of burst from burst.yaml: the
// slurm.conf include (cloud nodes, partitions, power saving), gres.conf, and
// compares an existing slurm.conf with what burst needs.
package slurmconf

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
)

// IncludeName and GresName are the files Render's output goes to.
const (
	IncludeName   = "burst.conf"
	GresName      = "gres.conf"
	CliFilterName = "cli_filter.lua"
)

// Setting is one global slurm.conf key and its value.
type Setting struct {
	Key, Value, Comment string
}

// NodeLine is one NodeName line.
type NodeLine struct {
	Class    string
	Names    string // hostlist, e.g. l4-[1-4]
	CPUs     int
	MemMiB   int
	Gres     string
	Features []string
	Weight   int
	PriceUSD float64 // cheapest candidate on-demand price, for the comment
	Types    []string
}

// PartitionLine is one PartitionName line.
type PartitionLine struct {
	Name    string
	Nodes   []string
	Default bool
	MaxTime string
}

// Plan is everything burst needs in slurm.conf, before formatting.
type Plan struct {
	Source string
	// Slurm is the release the plan is written for: what burst.conf and
	// gres.conf hold depends on it (see Build).
	Slurm      slurm.Version
	Settings   []Setting
	Nodes      []NodeLine
	Partitions []PartitionLine
	Gres       []string // gres.conf lines
	// AutoDetect is gres.conf's AutoDetect: "nvml" where the release
	// accepts it with CLOUD nodes, else "off".
	AutoDetect string
}

// Build derives the plan for Slurm release v from a validated
// configuration. What differs by release:
//
//   - SlurmctldParameters: cloud_reg_addrs (nodes register with their own
//     address) before 23.11; from 23.11 that is Slurm's behaviour and the
//     option is defunct (slurmctld logs an error for it).
//   - SchedulerParameters=requeue_on_resume_failure from 25.05: a job whose
//     nodes burst hands back after a failed launch is requeued even when it
//     asked not to be (it never ran); before 25.05, and without it, Slurm
//     ends such a job NODE_FAIL. It does not shorten the requeued job's
//     BeginTime hold (~120 s, cred_expire); TestFaultLaunchFailedWait
//     measures both.
//   - gres.conf: every class gets explicit lines (Name=gpu Type=<model>
//     File=<gpu_devices>[0-N] Count=N), which every release accepts on the
//     controller and configless nodes fetch; with gres_autodetect: nvml,
//     AutoDetect=nvml is added from 24.11 (slurmctld 22.05 exits with "Cannot
//     use AutoDetect on cloud node"; 24.11.5 and 26.05.5 accept it with
//     CLOUD nodes; 23.02-24.05 are not verified, so they get the explicit
//     lines only).
func Build(cfg *config.Config, cat *catalog.Catalog, v slurm.Version) (*Plan, error) {
	if v.IsZero() {
		return nil, fmt.Errorf("writing Slurm's configuration: no Slurm version (set slurm.version in %s or pass --slurm-version)", cfg.Source)
	}
	if !v.AtLeast(22, 5) {
		return nil, fmt.Errorf("writing Slurm's configuration: Slurm %s is older than 22.05, the oldest release burst supports", v)
	}
	p := &Plan{Source: cfg.Source, Slurm: v}
	p.Settings = settings(cfg, v)

	byClass, err := p.addNodes(cfg, cat)
	if err != nil {
		return nil, err
	}
	for _, part := range cfg.Slurm.Partitions {
		pl := PartitionLine{Name: part.Name, Default: part.Default, MaxTime: part.MaxTime}
		if pl.MaxTime == "" {
			pl.MaxTime = "INFINITE"
		}
		for _, n := range p.Nodes { // cheapest first
			if len(part.Classes) == 0 || contains(part.Classes, n.Class) {
				pl.Nodes = append(pl.Nodes, byClass[n.Class])
			}
		}
		p.Partitions = append(p.Partitions, pl)
	}
	p.AutoDetect = "off"
	if cfg.Slurm.GresAutodetect == "nvml" && v.AtLeast(24, 11) {
		p.AutoDetect = "nvml"
	}
	return p, nil
}

// settings are the slurm.conf settings burst needs on Slurm v.
func settings(cfg *config.Config, v slurm.Version) []Setting {
	var out []Setting
	bin := func(name string) string { return filepath.Join(cfg.Slurm.BurstBin, name) }
	secs := func(d config.Duration) string { return fmt.Sprint(int(math.Ceil(d.Seconds()))) }
	add := func(k, v, c string) { out = append(out, Setting{k, v, c}) }
	add("ResumeProgram", bin("burst-resume"), "launches instances for nodes Slurm powers up")
	add("SuspendProgram", bin("burst-suspend"), "terminates instances of nodes Slurm powers down")
	add("ResumeFailProgram", bin("burst-suspend"), "cleans up nodes that did not come up within ResumeTimeout")
	add("ResumeTimeout", secs(cfg.Slurm.ResumeTimeout), "")
	add("SuspendTimeout", secs(cfg.Slurm.SuspendTimeout), "")
	add("SuspendTime", secs(cfg.Slurm.SuspendTime), "safety net only: burst releases nodes when their job ends")
	add("ResumeRate", fmt.Sprint(cfg.Slurm.ResumeRate), "")
	add("SuspendRate", fmt.Sprint(cfg.Slurm.SuspendRate), "")
	params, why := "idle_on_node_suspend,power_save_min_interval=0,power_save_interval=1", "power_save_interval=1: the power-save thread runs every second"
	if !v.AtLeast(23, 11) {
		params, why = "idle_on_node_suspend,cloud_reg_addrs,power_save_min_interval=0,power_save_interval=1", "cloud_reg_addrs: nodes register with their own address (the default from 23.11)"
	}
	if cfg.Slurm.NodeConf == "configless" {
		params, why = params+",enable_configless", why+"; enable_configless: nodes fetch slurm.conf from slurmctld"
	}
	add("SlurmctldParameters", params, why)
	if v.AtLeast(25, 5) {
		add("SchedulerParameters", "requeue_on_resume_failure", "a job whose nodes burst hands back (failed launch) is requeued even with --no-requeue: it never ran (without it 26.05 ends it NODE_FAIL)")
	}
	if cfg.Slurm.PrologWait {
		add("PrologSlurmctld", bin("burst-resume"), "returns when the job's nodes registered, so the job starts at once")
	}
	if cfg.Teardown.ReleaseOnCompletion {
		add("EpilogSlurmctld", bin("burst-suspend"), "event-driven release: powers the job's nodes down when it ends")
	}
	add("Prolog", bin("burst-agent"), "as root on the node: makes the job's checkpoint directory for its user (0700, no symlinks followed)")
	add("TaskProlog", bin("burst-agent"), "gives every task BURST_CHECKPOINT_DIR (its job's checkpoint directory on FSx)")
	add("PrivateData", "cloud", "show powered-down cloud nodes in sinfo and scontrol")
	add("TreeWidth", fmt.Sprint(cfg.Slurm.TreeWidth), "")
	add("GresTypes", "gpu", "")
	if cfg.Slurm.CliFilter {
		add("CliFilterPlugins", "cli_filter/lua", "sizes jobs at submission through cli_filter.lua")
	}
	return out
}

// addNodes adds a node line and a gres line per class, cheapest first,
// and returns each class's node names.
func (p *Plan) addNodes(cfg *config.Config, cat *catalog.Catalog) (map[string]string, error) {
	type ranked struct {
		cl    *config.Class
		price float64
		types []catalog.InstanceType
	}
	var rs []ranked
	for i := range cfg.Classes {
		cl := &cfg.Classes[i]
		ts := cl.Candidates(cat)
		if len(ts) == 0 {
			return nil, fmt.Errorf("class %s has no candidate instance types in the catalog", cl.Name)
		}
		rs = append(rs, ranked{cl, ts[0].OnDemandUSD, ts})
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].price < rs[j].price })
	byClass := map[string]string{}
	for i, r := range rs {
		cpus, mem := r.types[0].VCPU, r.types[0].MemoryMiB
		var names []string
		for _, t := range r.types {
			cpus, mem = min(cpus, t.VCPU), min(mem, t.MemoryMiB)
			names = append(names, t.Name)
		}
		head := r.cl.MemoryHeadroomMiB
		if head == 0 {
			head = max(1024, mem/20)
		}
		feats := dedupe(append([]string{"burst", r.cl.Name, r.cl.GPUModel}, r.cl.Features...))
		n := NodeLine{Class: r.cl.Name, Names: r.cl.NodeNames(), CPUs: cpus, MemMiB: mem - head,
			Gres: fmt.Sprintf("gpu:%s:%d", r.cl.GPUModel, r.cl.GPUsPerNode), Features: feats, Weight: i + 1,
			PriceUSD: r.price, Types: names}
		p.Nodes = append(p.Nodes, n)
		byClass[r.cl.Name] = n.Names
		files := fmt.Sprintf("%s[0-%d]", cfg.Slurm.GresFiles, r.cl.GPUsPerNode-1)
		if r.cl.GPUsPerNode == 1 {
			files = cfg.Slurm.GresFiles + "0"
		}
		p.Gres = append(p.Gres, fmt.Sprintf("NodeName=%s Name=gpu Type=%s File=%s Count=%d", n.Names, r.cl.GPUModel, files, r.cl.GPUsPerNode))
	}
	return byClass, nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (n NodeLine) attrs() [][2]string {
	return [][2]string{{"CPUs", fmt.Sprint(n.CPUs)}, {"RealMemory", fmt.Sprint(n.MemMiB)}, {"Gres", n.Gres},
		{"Features", strings.Join(n.Features, ",")}, {"Weight", fmt.Sprint(n.Weight)}, {"State", "CLOUD"}}
}

func (pl PartitionLine) attrs() [][2]string {
	def := "NO"
	if pl.Default {
		def = "YES"
	}
	return [][2]string{{"Nodes", strings.Join(pl.Nodes, ",")}, {"Default", def}, {"MaxTime", pl.MaxTime}, {"State", "UP"}}
}

// Include formats the slurm.conf include file.
func (p *Plan) Include() []byte {
	var b strings.Builder
	src := p.Source
	if src == "" {
		src = "burst.yaml"
	}
	fmt.Fprintf(&b, "# Generated by burst-slurm-conf from %s for Slurm %d.%02d. Do not edit: change burst.yaml and regenerate.\n", src, p.Slurm.Major, p.Slurm.Minor)
	fmt.Fprintf(&b, "# Add to slurm.conf:  Include <this directory>/%s\n\n# ---- power saving\n", IncludeName)
	for _, s := range p.Settings {
		if s.Comment != "" {
			fmt.Fprintf(&b, "# %s\n", s.Comment)
		}
		fmt.Fprintf(&b, "%s=%s\n", s.Key, s.Value)
	}
	b.WriteString("\n# ---- node classes, cheapest first (Slurm prefers the lowest Weight that fits)\n")
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "# %s: %s (from $%.4f/h on demand)\n", n.Class, strings.Join(n.Types, ", "), n.PriceUSD)
		fmt.Fprintf(&b, "NodeName=%s", n.Names)
		for _, a := range n.attrs() {
			fmt.Fprintf(&b, " %s=%s", a[0], a[1])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n# ---- partitions\n")
	for _, pl := range p.Partitions {
		fmt.Fprintf(&b, "PartitionName=%s", pl.Name)
		for _, a := range pl.attrs() {
			fmt.Fprintf(&b, " %s=%s", a[0], a[1])
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// GresConf formats gres.conf.
func (p *Plan) GresConf() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by burst-slurm-conf for Slurm %d.%02d. Do not edit: change burst.yaml and regenerate.\n", p.Slurm.Major, p.Slurm.Minor)
	b.WriteString("# The nodes fetch this file from slurmctld (configless) or share it.\n")
	switch {
	case p.AutoDetect == "nvml":
		b.WriteString("# AutoDetect=nvml: slurmd finds each GPU's cores and links; the lines below name the types slurm.conf uses\n")
	case p.Slurm.AtLeast(24, 11):
		b.WriteString("# AutoDetect=off: gres_autodetect is off in burst.yaml (device files from gpu_devices)\n")
	default:
		b.WriteString("# AutoDetect=off: slurmctld before 24.11 refuses AutoDetect for CLOUD nodes (\"Cannot use AutoDetect on cloud node\")\n")
	}
	fmt.Fprintf(&b, "AutoDetect=%s\n", p.AutoDetect)
	for _, l := range p.Gres {
		b.WriteString(l + "\n")
	}
	return []byte(b.String())
}
