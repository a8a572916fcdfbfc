package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

func (v *validator) network() {
	n := v.c.Network
	for z, s := range n.Subnets {
		if !strings.HasPrefix(z, v.c.Cluster.Region) {
			v.add("network.subnets."+z, "zone %q is not in region %s", z, v.c.Cluster.Region)
		}
		v.resourceID("network.subnets."+z, s, "subnet", "a subnet")
	}
	for i, g := range n.SecurityGroups {
		v.resourceID(fmt.Sprintf("network.security_groups[%d]", i), g, "sg", "a security group")
	}
}

func (v *validator) image() {
	im := v.c.Image
	switch {
	case im.AMI == "" && im.LaunchTemplate == "":
		v.add("image", "give image.ami (built with `make image`) or image.launch_template")
	case im.AMI != "" && im.LaunchTemplate != "":
		v.add("image", "give image.ami or image.launch_template, not both")
	case im.AMI != "":
		v.resourceID("image.ami", im.AMI, "ami", "an AMI")
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
	v.hostPort("sizer.listen", s.Listen, true)
	switch u, err := url.Parse(s.URL); {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add("sizer.url", "%q is not an https URL", s.URL)
	case u.Scheme != "https":
		v.add("sizer.url", "%q: the sizer serves HTTPS only (bearer tokens never cross the network in clear); write https:// and run `burst-sizer tls init`", s.URL)
	}
	if u, err := url.Parse(s.URL); err == nil && u.Port() != "" {
		v.hostPort("sizer.url", u.Host, false)
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
	v.store()
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
	switch s.RouteAuth {
	case "munge", "token":
	default:
		v.add("sizer.route_auth", "%q: want munge (the submitting user proves who they are with MUNGE) or token (the request's user is taken as claimed)", s.RouteAuth)
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
