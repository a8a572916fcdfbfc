package config

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
)

var slurmUserRe = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)

// slurmAPI checks slurm.api and, for rest, slurm.rest: the URL, exactly one
// credential, present and private (mode 0600), the user, the fallback.
func (v *validator) slurmAPI() {
	s := v.c.Slurm
	switch s.API {
	case "cli":
		return
	case "rest":
	default:
		v.add("slurm.api", "%q: want cli (scontrol, squeue, sinfo) or rest (slurmrestd)", s.API)
		return
	}
	r := s.Rest
	v.restURL(r)
	secret := func(path, file string) {
		if !filepath.IsAbs(file) {
			v.add(path, "%q is not an absolute path", file)
			return
		}
		if err := auth.CheckPrivate(file); err != nil {
			v.add(path, "%v", err)
		}
	}
	switch {
	case r.JWTKeyFile != "" && r.TokenFile != "":
		v.add("slurm.rest.token_file", "set with jwt_key_file: give one credential, the JWT key (burst mints its tokens) or a token file")
	case r.JWTKeyFile != "":
		secret("slurm.rest.jwt_key_file", r.JWTKeyFile)
		if r.User == "" {
			v.add("slurm.rest.user", "required with jwt_key_file: the Slurm user burst's tokens name (SlurmUser, e.g. slurm)")
		}
	case r.TokenFile != "":
		secret("slurm.rest.token_file", r.TokenFile)
	default:
		v.add("slurm.rest.jwt_key_file", "slurm.api: rest needs a credential: jwt_key_file (slurm.conf's AuthAltParameters=jwt_key=...) or token_file (scontrol token)")
	}
	if r.User != "" && !slurmUserRe.MatchString(r.User) {
		v.add("slurm.rest.user", "%q is not a user name", r.User)
	}
	if r.TokenLifetime.Duration < 30*time.Second || r.TokenLifetime.Duration > 24*time.Hour {
		v.add("slurm.rest.token_lifetime", "%s: want between 30s and 24h", r.TokenLifetime.Duration)
	}
	if r.Fallback != "cli" && r.Fallback != "none" {
		v.add("slurm.rest.fallback", "%q: want cli (the command line does what a release's REST API cannot) or none", r.Fallback)
	}
}

// restURL checks slurm.rest.url with ca_file and insecure_loopback: every
// request carries a SlurmUser token, so it goes over a unix socket, over
// HTTPS verified against ca_file, or, only where the admin says so, over
// plain HTTP to a loopback address.
func (v *validator) restURL(r Rest) {
	const fix = "use https://host:port with slurm.rest.ca_file (slurmrestd's CA; TLS needs Slurm 25.05 or later) or unix:/run/slurmrestd/slurmrestd.socket (slurmrestd on this host)"
	u, err := url.Parse(r.URL)
	switch {
	case r.URL == "":
		v.add("slurm.rest.url", "required with slurm.api: rest: slurmrestd's address, e.g. unix:/run/slurmrestd/slurmrestd.socket or https://ctld:6820 (with ca_file)")
		return
	case strings.HasPrefix(r.URL, "unix:"):
		if !filepath.IsAbs(strings.TrimPrefix(r.URL, "unix:")) {
			v.add("slurm.rest.url", "%q: want unix:/absolute/path/to/socket", r.URL)
		}
		u = &url.URL{Scheme: "unix"}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "":
		v.add("slurm.rest.url", "%q: want https://host:port or unix:/path/to/socket (no path, user or query)", r.URL)
		return
	}
	if u.Scheme != "https" && r.CAFile != "" {
		v.add("slurm.rest.ca_file", "set with %s: the CA verifies slurmrestd's certificate, for an https:// url only", u.Scheme)
	}
	if u.Scheme != "http" && r.InsecureLoopback {
		v.add("slurm.rest.insecure_loopback", "set with %s: it only allows plain http:// to a loopback address; remove it", u.Scheme)
	}
	switch u.Scheme {
	case "https":
		switch {
		case r.CAFile == "":
			v.add("slurm.rest.ca_file", "required with an https:// url: the PEM file of the CA that signed slurmrestd's certificate (the system roots are not trusted)")
		case !filepath.IsAbs(r.CAFile):
			v.add("slurm.rest.ca_file", "%q is not an absolute path", r.CAFile)
		default:
			if _, err := os.Stat(r.CAFile); err != nil {
				v.add("slurm.rest.ca_file", "%v", err)
			}
		}
	case "http":
		switch {
		case !IsLoopbackHost(u.Host):
			v.add("slurm.rest.url", "%q: plain HTTP would send a SlurmUser token (Slurm administrator rights) in clear text across the network; %s", r.URL, fix)
		case !r.InsecureLoopback:
			v.add("slurm.rest.url", "%q: plain HTTP, even to a loopback address, needs slurm.rest.insecure_loopback: true (any local process that can read loopback traffic sees the SlurmUser token); or %s", r.URL, fix)
		}
	}
}

// IsLoopbackHost reports whether hostport ("127.0.0.1:6820", "[::1]:6820")
// names a loopback IP literally; a name ("localhost") is not trusted to
// resolve to one.
func IsLoopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
