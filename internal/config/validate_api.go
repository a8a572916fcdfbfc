package config

import (
	"net/url"
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
	switch u, err := url.Parse(r.URL); {
	case r.URL == "":
		v.add("slurm.rest.url", "required with slurm.api: rest: slurmrestd's address, e.g. http://ctld:6820 or unix:/run/slurmrestd/slurmrestd.socket")
	case strings.HasPrefix(r.URL, "unix:"):
		if !filepath.IsAbs(strings.TrimPrefix(r.URL, "unix:")) {
			v.add("slurm.rest.url", "%q: want unix:/absolute/path/to/socket", r.URL)
		}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "":
		v.add("slurm.rest.url", "%q: want http://host:port, https://host:port or unix:/path/to/socket (no path, user or query)", r.URL)
	}
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
