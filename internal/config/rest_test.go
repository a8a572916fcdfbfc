package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmRESTProblems: slurm.api: rest needs a URL and exactly one
// private credential; every problem names its key.
func TestSlurmRESTProblems(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "jwt.key")
	open := filepath.Join(dir, "open.key")
	tok := filepath.Join(dir, "token")
	ca := filepath.Join(dir, "ca.pem")
	for p, mode := range map[string]os.FileMode{key: 0o600, open: 0o644, tok: 0o600, ca: 0o644} {
		if err := os.WriteFile(p, []byte("0123456789abcdef0123456789abcdef"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	rest := func(body string) string {
		return strings.Replace(good, "controller: 10.0.0.1", "controller: 10.0.0.1\n  api: rest\n  rest:\n"+body, 1)
	}
	cases := []struct {
		name string
		yaml string
		want []string // "path:substring"
	}{
		{"key file", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    user: slurm\n    jwt_key_file: " + key + "\n"), nil},
		{"token file over a socket", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    token_file: " + tok + "\n"), nil},
		{"unknown api", strings.Replace(good, "controller: 10.0.0.1", "controller: 10.0.0.1\n  api: http", 1),
			[]string{`slurm.api:"http": want cli (scontrol, squeue, sinfo) or rest`}},
		{"nothing", rest("    user: slurm\n"),
			[]string{"slurm.rest.url:required with slurm.api: rest", "slurm.rest.jwt_key_file:needs a credential"}},
		{"both credentials", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    user: slurm\n    jwt_key_file: " + key + "\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.token_file:give one credential"}},
		{"missing key file", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    user: slurm\n    jwt_key_file: " + filepath.Join(dir, "nope") + "\n"),
			[]string{"slurm.rest.jwt_key_file:no such file"}},
		{"world-readable key", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    user: slurm\n    jwt_key_file: " + open + "\n"),
			[]string{"slurm.rest.jwt_key_file:mode 0644"}},
		{"relative key", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    user: slurm\n    jwt_key_file: jwt.key\n"),
			[]string{"slurm.rest.jwt_key_file:not an absolute path"}},
		{"key without user", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    jwt_key_file: " + key + "\n"),
			[]string{"slurm.rest.user:required with jwt_key_file"}},
		{"bad url, lifetime, fallback", rest("    url: ftp://x/y\n    token_file: " + tok + "\n    token_lifetime: 1s\n    fallback: scontrol\n"),
			[]string{"slurm.rest.url:want https://host:port", "slurm.rest.token_lifetime:want between 30s and 24h", `slurm.rest.fallback:"scontrol"`}},
		{"relative socket", rest("    url: unix:slurmrestd.sock\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.url:want unix:/absolute/path"}},
		{"https with its CA", rest("    url: https://10.0.0.1:6820\n    ca_file: " + ca + "\n    token_file: " + tok + "\n"), nil},
		{"insecure loopback", rest("    url: http://127.0.0.1:6820\n    insecure_loopback: true\n    token_file: " + tok + "\n"), nil},
		{"insecure loopback v6", rest("    url: http://[::1]:6820\n    insecure_loopback: true\n    token_file: " + tok + "\n"), nil},
		// the README's old example: the SlurmUser token in clear text on the network
		{"plain http", rest("    url: http://10.0.0.10:6820\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.url:plain HTTP would send a SlurmUser token"}},
		{"plain http marked insecure", rest("    url: http://10.0.0.10:6820\n    insecure_loopback: true\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.url:in clear text across the network; use https://host:port with slurm.rest.ca_file"}},
		{"localhost is a name", rest("    url: http://localhost:6820\n    insecure_loopback: true\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.url:plain HTTP would send"}},
		{"loopback not marked", rest("    url: http://127.0.0.1:6820\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.url:needs slurm.rest.insecure_loopback: true"}},
		{"https without CA", rest("    url: https://10.0.0.1:6820\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.ca_file:required with an https:// url"}},
		{"https with a missing CA", rest("    url: https://10.0.0.1:6820\n    ca_file: " + filepath.Join(dir, "nope.pem") + "\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.ca_file:no such file"}},
		{"CA and insecure with a socket", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    ca_file: " + ca + "\n    insecure_loopback: true\n    token_file: " + tok + "\n"),
			[]string{"slurm.rest.ca_file:for an https:// url only", "slurm.rest.insecure_loopback:remove it"}},
		{"unknown rest key", rest("    url: unix:/run/slurmrestd/slurmrestd.socket\n    token_file: " + tok + "\n    jwt_key: x\n"),
			[]string{`slurm.rest.jwt_key:unknown key "jwt_key"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "burst.yaml")
			if err == nil {
				err = cfg.Validate()
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Slurm.API != "rest" || cfg.Slurm.Rest.Fallback != "cli" || cfg.Slurm.Rest.TokenLifetime.Minutes() != 5 {
					t.Errorf("defaults: %+v", cfg.Slurm.Rest)
				}
				return
			}
			ps, ok := err.(Problems)
			if !ok {
				t.Fatalf("want Problems, got %v", err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("want %d problems, got %d:\n%v", len(tc.want), len(ps), err)
			}
			for _, w := range tc.want {
				path, sub, _ := strings.Cut(w, ":")
				found := false
				for _, p := range ps {
					found = found || p.Path == path && strings.Contains(p.Msg, sub) && p.Line > 0
				}
				if !found {
					t.Errorf("missing problem %q in:\n%v", w, err)
				}
			}
		})
	}
}
