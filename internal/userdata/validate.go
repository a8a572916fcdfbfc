package userdata

import (
	"fmt"

	"github.com/burst-hpc/burst/internal/tlspin"
	"net"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// maxCA bounds agent.sizer_ca (user data is 16 KB in all).
const maxCA = 8192

var (
	// Slurm node and cluster names: conservative subset of what Slurm accepts.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	// RFC 1123 host names (also matches dotted IPv4).
	hostRE = regexp.MustCompile(`^(?i:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.(?i:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?))*$`)
	// FSx for Lustre mount names (FSx API pattern).
	mountNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,8}$`)
	// Absolute paths: safe characters only.
	pathRE = regexp.MustCompile(`^/[A-Za-z0-9_.@+/-]*$`)
	// arn:aws[-partition]:secretsmanager:region:account:secret:name
	secretARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:secretsmanager:([a-z]{2}(-[a-z]+)+-[0-9]):([0-9]{12}):secret:([A-Za-z0-9/_+=.@-]{1,512})$`)
	// URL characters allowed in sizer and IMDS URLs (no quotes, spaces, shell metacharacters).
	urlCharsRE = regexp.MustCompile(`^[A-Za-z0-9._~:/?#\[\]@%+=,-]+$`)
)

// Validate reports every problem with its JSON path. It does not apply defaults.
func (u *UserData) Validate() error {
	var pr problems
	u.checkIdentity(&pr)
	u.checkSlurm(&pr)
	u.checkMunge(&pr)
	u.checkFSx(&pr)
	u.checkAgent(&pr)
	if u.Test != nil {
		pr.absPath("test.local_fs_dir", u.Test.LocalFSDir, true)
	}
	if len(pr) > 0 {
		return &ValidationError{Problems: pr}
	}
	return nil
}

// problems collects what is wrong with a document, each "field: what".
type problems []string

func (pr *problems) add(field, format string, args ...any) {
	*pr = append(*pr, field+": "+fmt.Sprintf(format, args...))
}

func (pr *problems) name(field, v string) {
	switch {
	case v == "":
		pr.add(field, "missing")
	case !nameRE.MatchString(v):
		pr.add(field, "%q is not a valid name (letters, digits, '_', '.', '-'; at most 63; starts with a letter or digit)", v)
	}
}

func (pr *problems) absPath(field, v string, required bool) {
	switch {
	case v == "":
		if required {
			pr.add(field, "missing")
		}
	case !pathRE.MatchString(v):
		pr.add(field, "%q must be an absolute path of letters, digits and _ . @ + / -", v)
	case path.Clean(v) != v || v == "/":
		pr.add(field, "%q is not a clean absolute path below / (want %q)", v, path.Clean(v))
	}
}

func (pr *problems) url(field, v string, required bool) {
	if v == "" {
		if required {
			pr.add(field, "missing")
		}
		return
	}
	if len(v) > 2048 || !urlCharsRE.MatchString(v) {
		pr.add(field, "%q contains characters not allowed in a URL here", v)
		return
	}
	pu, err := url.Parse(v)
	switch {
	case err != nil:
		pr.add(field, "%q is not a URL: %v", v, err)
	case pu.Scheme != "http" && pu.Scheme != "https":
		pr.add(field, "%q: scheme must be http or https", v)
	case (field == "agent.sizer_url" || strings.HasPrefix(field, "agent.sizer_urls[")) && pu.Scheme != "https":
		pr.add(field, "%q: the sizer is reached over https only (run `burst-sizer tls init`)", v)
	case pu.Host == "":
		pr.add(field, "%q has no host", v)
	case pu.User != nil:
		pr.add(field, "%q must not carry user:password (nothing secret goes into user data)", v)
	}
}

func (u *UserData) checkIdentity(pr *problems) {
	if u.NodeName != "" {
		pr.name("node_name", u.NodeName)
	}
	pr.name("cluster", u.Cluster)
	if u.IssuedAt.IsZero() {
		pr.add("issued_at", "missing (RFC 3339 time burst-resume launched the instance)")
	}
}

func (u *UserData) checkSlurm(pr *problems) {
	if len(u.Slurm.Controllers) == 0 {
		pr.add("slurm.controllers", "missing (at least one slurmctld host name or IPv4 address)")
	}
	if len(u.Slurm.Controllers) > 8 {
		pr.add("slurm.controllers", "%d controllers, at most 8", len(u.Slurm.Controllers))
	}
	for i, c := range u.Slurm.Controllers {
		f := fmt.Sprintf("slurm.controllers[%d]", i)
		if c == "" {
			pr.add(f, "empty")
		} else if ip := net.ParseIP(c); ip != nil && ip.To4() == nil {
			pr.add(f, "%q: IPv6 controller addresses are not supported; use a host name", c)
		} else if len(c) > 253 || !hostRE.MatchString(c) {
			pr.add(f, "%q is not a host name or IPv4 address", c)
		}
	}
	if u.Slurm.Port < 1 || u.Slurm.Port > 65535 {
		pr.add("slurm.port", "%d is not a TCP port (1-65535)", u.Slurm.Port)
	}
	switch u.Slurm.ConfMode {
	case ConfConfigless:
		if u.Slurm.ConfPath != "" {
			pr.add("slurm.conf_path", "set with conf_mode %q; remove it or use conf_mode %q", ConfConfigless, ConfFile)
		}
		// slurmd authenticates its configuration request before it has
		// slurm.conf (and so AuthInfo): munge must be on its default socket.
		if u.Munge.Socket != "" && u.Munge.Socket != DefaultMungeSocket {
			pr.add("munge.socket", "%q: with conf_mode %q slurmd fetches slurm.conf through munge's default socket %s; use it or conf_mode %q",
				u.Munge.Socket, ConfConfigless, DefaultMungeSocket, ConfFile)
		}
	case ConfFile:
		pr.absPath("slurm.conf_path", u.Slurm.ConfPath, true)
	default:
		pr.add("slurm.conf_mode", "%q is not %q or %q", u.Slurm.ConfMode, ConfConfigless, ConfFile)
	}
}

func (u *UserData) checkMunge(pr *problems) {
	switch src := u.Munge.KeySource; {
	case src == "":
		pr.add("munge.key_source", "missing (a Secrets Manager secret ARN or file:///path)")
	case strings.HasPrefix(src, "file://"):
		pr.absPath("munge.key_source", strings.TrimPrefix(src, "file://"), true)
	case strings.HasPrefix(src, "arn:"):
		if !secretARNRE.MatchString(src) {
			pr.add("munge.key_source", "%q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)", src)
		}
	default:
		pr.add("munge.key_source", "%q: want arn:aws:secretsmanager:... or file:///path", src)
	}
	pr.absPath("munge.key_path", u.Munge.KeyPath, true)
	pr.absPath("munge.socket", u.Munge.Socket, true)
}

func (u *UserData) checkFSx(pr *problems) {
	switch d := u.FSx.DNSName; {
	case d == "":
		pr.add("fsx.dns_name", "missing")
	case len(d) > 253 || !hostRE.MatchString(d):
		pr.add("fsx.dns_name", "%q is not a DNS name", d)
	}
	switch m := u.FSx.MountName; {
	case m == "":
		pr.add("fsx.mount_name", "missing")
	case !mountNameRE.MatchString(m):
		pr.add("fsx.mount_name", "%q is not an FSx mount name (1-8 of A-Z a-z 0-9 _ -)", m)
	}
	pr.absPath("fsx.mount_point", u.FSx.MountPoint, true)
	pr.absPath("fsx.checkpoint_root", u.FSx.CheckpointRoot, true)
	if u.FSx.MountPoint != "" && u.FSx.CheckpointRoot != "" && !isUnder(u.FSx.CheckpointRoot, u.FSx.MountPoint) {
		pr.add("fsx.checkpoint_root", "%q is not inside fsx.mount_point %q", u.FSx.CheckpointRoot, u.FSx.MountPoint)
	}
}

func (u *UserData) checkAgent(pr *problems) {
	pr.url("agent.sizer_url", u.Agent.SizerURL, true)
	if len(u.Agent.SizerURLs) > 8 {
		pr.add("agent.sizer_urls", "%d sizers: at most 8", len(u.Agent.SizerURLs))
	}
	for i, v := range u.Agent.SizerURLs {
		pr.url(fmt.Sprintf("agent.sizer_urls[%d]", i), v, true)
	}
	pr.url("agent.imds_endpoint", u.Agent.IMDSEndpoint, false)
	switch {
	case u.Agent.SizerCA == "":
		pr.add("agent.sizer_ca", "missing (the PEM CA certificate of the sizer; `burst-sizer tls init` writes it)")
	case len(u.Agent.SizerCA) > maxCA:
		pr.add("agent.sizer_ca", "%d bytes, at most %d", len(u.Agent.SizerCA), maxCA)
	default:
		if _, err := tlspin.ParseCA([]byte(u.Agent.SizerCA)); err != nil {
			pr.add("agent.sizer_ca", "%v", err)
		}
	}
	if ri := time.Duration(u.Agent.ReportInterval); ri < time.Second || ri > time.Hour {
		pr.add("agent.report_interval", "%s is outside 1s..1h", ri)
	}
	switch u.Agent.GPUSource {
	case "", "nvml", "sim":
	default:
		pr.add("agent.gpu_source", "%q: want nvml or sim", u.Agent.GPUSource)
	}
	if p := u.Agent.SimMemoryPercent; p < 0 || p > 100 || p > 0 && u.Agent.GPUSource != "sim" {
		pr.add("agent.sim_memory_percent", "%d: want 0..100, and only with gpu_source sim", p)
	}
	switch u.Agent.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		pr.add("agent.log_level", "%q: want debug, info, warn or error", u.Agent.LogLevel)
	}
}

func isUnder(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
