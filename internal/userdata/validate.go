package userdata

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

var (
	// Slurm node and cluster names: conservative subset of what Slurm accepts.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	// RFC 1123 host names (also matches dotted IPv4).
	hostRE = regexp.MustCompile(`^(?i:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.(?i:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?))*$`)
	// FSx for Lustre mount names (FSx API pattern).
	mountNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,8}$`)
	// Absolute paths: safe characters only.
	pathRE = regexp.MustCompile(`^/[A-Za-z0-9_.@+/-]*$`)
	// Bearer tokens: RFC 6750 b64token characters.
	credRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=:-]{16,512}$`)
	// arn:aws[-partition]:secretsmanager:region:account:secret:name
	secretARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:secretsmanager:([a-z]{2}(-[a-z]+)+-[0-9]):([0-9]{12}):secret:([A-Za-z0-9/_+=.@-]{1,512})$`)
	// URL characters allowed in sizer and IMDS URLs (no quotes, spaces, shell metacharacters).
	urlCharsRE = regexp.MustCompile(`^[A-Za-z0-9._~:/?#\[\]@%+=,-]+$`)
)

// Validate reports every problem with its JSON path. It does not apply defaults.
func (u *UserData) Validate() error {
	var p []string
	add := func(field, format string, args ...any) {
		p = append(p, field+": "+fmt.Sprintf(format, args...))
	}
	name := func(field, v string) {
		switch {
		case v == "":
			add(field, "missing")
		case !nameRE.MatchString(v):
			add(field, "%q is not a valid name (letters, digits, '_', '.', '-'; at most 63; starts with a letter or digit)", v)
		}
	}
	absPath := func(field, v string, required bool) {
		switch {
		case v == "":
			if required {
				add(field, "missing")
			}
		case !pathRE.MatchString(v):
			add(field, "%q must be an absolute path of letters, digits and _ . @ + / -", v)
		case path.Clean(v) != v || v == "/":
			add(field, "%q is not a clean absolute path below / (want %q)", v, path.Clean(v))
		}
	}
	credential := func(field, c string) {
		switch {
		case c == "":
			add(field, "missing")
		case !credRE.MatchString(c):
			add(field, "must be 16-512 characters of A-Z a-z 0-9 . _ ~ + / = : - (value not shown)")
		}
	}
	switch {
	case u.NodeName == "" && len(u.Nodes) == 0:
		add("node_name", "missing (or list the fleet's nodes in nodes)")
	case u.NodeName != "" && len(u.Nodes) > 0:
		add("nodes", "set together with node_name %q; use node_name for one node or nodes for a fleet", u.NodeName)
	case u.NodeName != "":
		name("node_name", u.NodeName)
		credential("agent.credential", u.Agent.Credential)
	default:
		if u.Agent.Credential != "" {
			add("agent.credential", "set in a fleet document; each entry of nodes carries its own")
		}
		seen := map[string]bool{}
		for i, n := range u.Nodes {
			f := fmt.Sprintf("nodes[%d]", i)
			name(f+".name", n.Name)
			if seen[n.Name] {
				add(f+".name", "%q listed twice", n.Name)
			}
			seen[n.Name] = true
			credential(f+".credential", n.Credential)
		}
	}
	name("cluster", u.Cluster)
	if u.IssuedAt.IsZero() {
		add("issued_at", "missing (RFC 3339 time burst-resume launched the instance)")
	}

	// slurm
	if len(u.Slurm.Controllers) == 0 {
		add("slurm.controllers", "missing (at least one slurmctld host name or IPv4 address)")
	}
	if len(u.Slurm.Controllers) > 8 {
		add("slurm.controllers", "%d controllers, at most 8", len(u.Slurm.Controllers))
	}
	for i, c := range u.Slurm.Controllers {
		f := fmt.Sprintf("slurm.controllers[%d]", i)
		if c == "" {
			add(f, "empty")
		} else if ip := net.ParseIP(c); ip != nil && ip.To4() == nil {
			add(f, "%q: IPv6 controller addresses are not supported; use a host name", c)
		} else if len(c) > 253 || !hostRE.MatchString(c) {
			add(f, "%q is not a host name or IPv4 address", c)
		}
	}
	if u.Slurm.Port < 1 || u.Slurm.Port > 65535 {
		add("slurm.port", "%d is not a TCP port (1-65535)", u.Slurm.Port)
	}
	switch u.Slurm.ConfMode {
	case ConfConfigless:
		if u.Slurm.ConfPath != "" {
			add("slurm.conf_path", "set with conf_mode %q; remove it or use conf_mode %q", ConfConfigless, ConfFile)
		}
		// slurmd authenticates its configuration request before it has
		// slurm.conf (and so AuthInfo): munge must be on its default socket.
		if u.Munge.Socket != "" && u.Munge.Socket != DefaultMungeSocket {
			add("munge.socket", "%q: with conf_mode %q slurmd fetches slurm.conf through munge's default socket %s; use it or conf_mode %q",
				u.Munge.Socket, ConfConfigless, DefaultMungeSocket, ConfFile)
		}
	case ConfFile:
		absPath("slurm.conf_path", u.Slurm.ConfPath, true)
	default:
		add("slurm.conf_mode", "%q is not %q or %q", u.Slurm.ConfMode, ConfConfigless, ConfFile)
	}

	// munge
	switch src := u.Munge.KeySource; {
	case src == "":
		add("munge.key_source", "missing (a Secrets Manager secret ARN or file:///path)")
	case strings.HasPrefix(src, "file://"):
		absPath("munge.key_source", strings.TrimPrefix(src, "file://"), true)
	case strings.HasPrefix(src, "arn:"):
		if !secretARNRE.MatchString(src) {
			add("munge.key_source", "%q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)", src)
		}
	default:
		add("munge.key_source", "%q: want arn:aws:secretsmanager:... or file:///path", src)
	}
	absPath("munge.key_path", u.Munge.KeyPath, true)
	absPath("munge.socket", u.Munge.Socket, true)

	// fsx
	switch d := u.FSx.DNSName; {
	case d == "":
		add("fsx.dns_name", "missing")
	case len(d) > 253 || !hostRE.MatchString(d):
		add("fsx.dns_name", "%q is not a DNS name", d)
	}
	switch m := u.FSx.MountName; {
	case m == "":
		add("fsx.mount_name", "missing")
	case !mountNameRE.MatchString(m):
		add("fsx.mount_name", "%q is not an FSx mount name (1-8 of A-Z a-z 0-9 _ -)", m)
	}
	absPath("fsx.mount_point", u.FSx.MountPoint, true)
	absPath("fsx.checkpoint_root", u.FSx.CheckpointRoot, true)
	if u.FSx.MountPoint != "" && u.FSx.CheckpointRoot != "" && !isUnder(u.FSx.CheckpointRoot, u.FSx.MountPoint) {
		add("fsx.checkpoint_root", "%q is not inside fsx.mount_point %q", u.FSx.CheckpointRoot, u.FSx.MountPoint)
	}

	// agent
	checkURL := func(field, v string, required bool) {
		if v == "" {
			if required {
				add(field, "missing")
			}
			return
		}
		if len(v) > 2048 || !urlCharsRE.MatchString(v) {
			add(field, "%q contains characters not allowed in a URL here", v)
			return
		}
		pu, err := url.Parse(v)
		switch {
		case err != nil:
			add(field, "%q is not a URL: %v", v, err)
		case pu.Scheme != "http" && pu.Scheme != "https":
			add(field, "%q: scheme must be http or https", v)
		case pu.Host == "":
			add(field, "%q has no host", v)
		case pu.User != nil:
			add(field, "%q must not carry user:password; use agent.credential", v)
		}
	}
	checkURL("agent.sizer_url", u.Agent.SizerURL, true)
	checkURL("agent.imds_endpoint", u.Agent.IMDSEndpoint, false)
	if ri := time.Duration(u.Agent.ReportInterval); ri < time.Second || ri > time.Hour {
		add("agent.report_interval", "%s is outside 1s..1h", ri)
	}
	switch u.Agent.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		add("agent.log_level", "%q: want debug, info, warn or error", u.Agent.LogLevel)
	}

	if u.Test != nil {
		absPath("test.local_fs_dir", u.Test.LocalFSDir, true)
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

func isUnder(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
