// Package compose is burst's composition root: the one place that turns
// burst.yaml into the parts the programs run (the logger, the Slurm client,
// the EC2 client and provider, the sizing policy, the sizer client). The five
// programs (resume, suspend, sizer, agent, slurm-conf) build their parts here
// and nowhere else; library packages take their own option structs and never
// see burst.yaml.
//
// compose sits above every other internal package and below the programs:
// it may import any internal package, and none imports it but a program.
package compose

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/awssdk"
	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/logging"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
)

// Getenv looks up an environment variable ("" when unset); programs pass
// os.Getenv, tests a map.
type Getenv func(string) string

// EnvOf turns KEY=value pairs (os.Environ) into a Getenv.
func EnvOf(env []string) Getenv {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return func(k string) string { return m[k] }
}

// Load finds burst.yaml (the --config value, then $BURST_CONFIG, burst.yaml
// beside $SLURM_CONF, then config.DefaultPath), loads it strictly with the
// BURST_* overrides of getenv and validates it. Problems come back as
// config.Problems (exit status 2).
func Load(flag string, getenv Getenv) (*config.Config, error) {
	lookup := func(k string) (string, bool) { v := getenv(k); return v, v != "" }
	return config.LoadEnv(config.Resolve(flag, getenv), lookup)
}

// FileLogger is the log of a program Slurm runs (its output is discarded):
// JSON lines in log.file at log.level, each naming prog. The close function
// flushes and closes the file.
func FileLogger(cfg *config.Config, prog string) (*slog.Logger, func() error) {
	return logging.Open(cfg.Log.File, cfg.Log.Level, prog)
}

// StderrLogger is the log of a daemon or an admin command: JSON (or text,
// for a terminal reader) lines on w at the given level ("" is info; an
// unknown level is info and says so).
func StderrLogger(w io.Writer, level, prog string, text bool) *slog.Logger {
	lvl, err := logging.ParseLevel(level)
	o := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewJSONHandler(w, o)
	if text {
		h = slog.NewTextHandler(w, o)
	}
	l := slog.New(h)
	if prog != "" {
		l = l.With("prog", prog)
	}
	if err != nil {
		l.Warn("bad log level; using info", "err", err)
	}
	return l
}

// CommandLogger is the log of a one-shot admin command (burst-sizer
// reconcile, route): text on w at log.level, except that info counts as
// warn, since such a command prints its result on standard output and logs
// only what went wrong (log.level: debug shows everything).
func CommandLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	level := cfg.Log.Level
	if lvl, err := logging.ParseLevel(level); err == nil && lvl == slog.LevelInfo {
		level = "warn"
	}
	return StderrLogger(w, level, "", true)
}

// StartupError records that prog could not start (typically a broken
// burst.yaml) in the default log file ($BURST_LOG_FILE when set, as for a
// loaded burst.yaml): Slurm discards the output of its hooks, and without a
// configuration the configured log is unknown. The caller still returns the
// error (printed on stderr, mapped to the exit status).
func StartupError(prog string, err error, getenv Getenv) {
	path := config.Default().Log.File
	if p := getenv("BURST_LOG_FILE"); p != "" {
		path = p
	}
	log, closeLog := logging.Open(path, "info", prog)
	defer closeLog()
	log.Error("cannot start", "err", err, "args", os.Args, "slurm_conf", getenv("SLURM_CONF"))
}

// SlurmConf is the slurm.conf the Slurm commands read: $SLURM_CONF, else
// slurm.conf in slurm.conf_dir (Slurm gives PrologSlurmctld and
// EpilogSlurmctld no SLURM_CONF).
func SlurmConf(cfg *config.Config, getenv Getenv) string {
	if c := getenv("SLURM_CONF"); c != "" {
		return c
	}
	return filepath.Join(cfg.Slurm.ConfDir, "slurm.conf")
}

// Slurm is the Slurm client burst.yaml's slurm.api selects: the
// command-line tools of slurm.bin_dir (cli), or slurmrestd at slurm.rest.url
// (rest), whose fallback (slurm.rest.fallback: cli) is those tools.
func Slurm(cfg *config.Config, getenv Getenv, log *slog.Logger) (slurm.Client, error) {
	return SlurmVia(cfg.Slurm.API, cfg.Slurm.Rest, cfg.Slurm.BinDir, SlurmConf(cfg, getenv), log)
}

// SlurmVia builds the client of api ("cli" or "rest") from settings in
// burst.yaml's form: burst-agent passes its flags this way.
func SlurmVia(api string, r config.Rest, binDir, conf string, log *slog.Logger) (slurm.Client, error) {
	cli := SlurmAt(binDir, conf, log)
	switch api {
	case "", "cli":
		return cli, nil
	case "rest":
	default:
		return nil, fmt.Errorf("Slurm API %q: want cli or rest", api)
	}
	o := rest.Options{URL: r.URL, CAFile: r.CAFile, InsecureLoopback: r.InsecureLoopback, User: r.User, JWTKeyFile: r.JWTKeyFile, TokenFile: r.TokenFile,
		TokenLifetime: r.TokenLifetime.Duration, Timeout: 20 * time.Second, Logger: log}
	if r.Fallback == "cli" {
		o.Fallback = cli
	}
	c, err := rest.New(o)
	if err != nil {
		return nil, fmt.Errorf("slurm.api rest: %w", err)
	}
	return c, nil
}

// SlurmAt is the Slurm client over the command-line tools in binDir reading
// conf (burst-agent's, from its flags).
func SlurmAt(binDir, conf string, log *slog.Logger) *slurm.Scontrol {
	return slurm.NewScontrol(slurm.ScontrolOptions{BinDir: binDir, Conf: conf, Logger: log, Timeout: 20 * time.Second})
}

// EC2Options are the EC2 client settings of burst.yaml: the cluster's
// region and endpoint, and dummy credentials only with
// cluster.ec2_static_credentials.
func EC2Options(cfg *config.Config) awssdk.Options {
	return awssdk.Options{Region: cfg.Cluster.Region, Endpoint: cfg.Cluster.EC2Endpoint, StaticCredentials: cfg.Cluster.EC2StaticCredentials}
}

// EC2API is the aws-sdk-go-v2 EC2 client every program uses.
func EC2API(ctx context.Context, o awssdk.Options) (*ec2.Client, error) {
	return ec2p.NewSDKClient(ctx, o)
}

// Cloud is the EC2 provider of the cluster: its subnets, image or launch
// template, instance profile, security groups, and the unavailable-offerings
// cache in sizer.state_dir.
func Cloud(ctx context.Context, cfg *config.Config, log *slog.Logger) (*ec2p.Provider, error) {
	api, err := EC2API(ctx, EC2Options(cfg))
	if err != nil {
		return nil, err
	}
	p, err := ec2p.New(api, ec2p.Options{
		Cluster: cfg.Cluster.Name, Subnets: cfg.Network.Subnets, LaunchTemplateName: cfg.Image.LaunchTemplate,
		ImageID: cfg.Image.AMI, InstanceProfile: cfg.Image.InstanceProfile, SecurityGroupIDs: cfg.Network.SecurityGroups,
		StateDir: cfg.Sizer.StateDir, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the EC2 provider: %w", err)
	}
	return p, nil
}

// ClassPartitions maps each class to the burst partitions that hold it, in
// the order of slurm.partitions (a partition without classes holds all).
func ClassPartitions(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for _, p := range cfg.Slurm.Partitions {
		names := p.Classes
		if len(names) == 0 {
			for _, c := range cfg.Classes {
				names = append(names, c.Name)
			}
		}
		for _, n := range names {
			out[n] = append(out[n], p.Name)
		}
	}
	return out
}

// SizingClasses maps burst.yaml's classes onto the sizing policy's: each
// with its candidate instance types from the catalog and the first partition
// that holds it.
func SizingClasses(cfg *config.Config, cat *catalog.Catalog) []sizing.Class {
	parts := ClassPartitions(cfg)
	var out []sizing.Class
	for i := range cfg.Classes {
		c := &cfg.Classes[i]
		pc := sizing.Class{Name: c.Name, GPUModel: c.GPUModel, GPUsPerNode: c.GPUsPerNode, MaxNodes: c.MaxNodes, Capacity: c.Capacity,
			// EFA interfaces come from the launch templates burst makes; an
			// admin's own template decides its network interfaces itself
			NoEFA: cfg.Image.LaunchTemplate != ""}
		for _, t := range c.Candidates(cat) {
			pc.InstanceTypes = append(pc.InstanceTypes, t.Name)
		}
		if ps := parts[c.Name]; len(ps) > 0 {
			pc.Partition = ps[0]
			pc.Partitions = append([]string(nil), ps...)
		}
		for _, p := range cfg.Slurm.Partitions {
			for _, q := range pc.Partitions {
				if q != p.Name {
					continue
				}
				if d, err := p.MaxTimeDuration(); err == nil && d > 0 && (pc.MaxTime == 0 || d < pc.MaxTime) {
					pc.MaxTime = d
				}
			}
		}
		out = append(out, pc)
	}
	return out
}

// Policy is the sizing policy of burst.yaml over the embedded catalog: the
// one burst-sizer ranks and routes with, and burst-resume ranks with
// in-process when the sizer does not answer (one policy, never two).
func Policy(cfg *config.Config) (*sizing.Policy, error) {
	p, err := sizing.New(catalog.Default(), cfg.Cluster.Region, SizingClasses(cfg, catalog.Default()), SizingParams(cfg))
	if err != nil {
		return nil, fmt.Errorf("building sizing policy from %s: %w", cfg.Source, err)
	}
	return p, nil
}

// SizingParams are the policy's tunables from burst.yaml's sizing section.
func SizingParams(cfg *config.Config) sizing.Params {
	p := sizing.DefaultParams()
	p.RewriteExplicit = cfg.Sizing.RewriteExplicit
	if cfg.Sizing.LearnAfterRuns > 0 {
		p.DownsizeMinJobs = cfg.Sizing.LearnAfterRuns
	}
	return p
}

// SizerClient is a client of burst-sizer serve with the admin token of
// sizer.token_file, and that token. Without a readable token it returns a
// nil client, "" and why: callers rank in-process and journal events.
func SizerClient(cfg *config.Config) (*sizerclient.Client, string, error) {
	tok, err := auth.LoadToken(cfg.Sizer.TokenFile)
	if err != nil {
		return nil, "", err
	}
	c, err := sizerclient.New(cfg.Sizer.URL, tok, sizerclient.WithTimeout(cfg.Sizer.Timeout.Duration), sizerclient.WithCAFile(cfg.Sizer.TLS.CAFile), sizerclient.WithFallbackURLs(cfg.Sizer.URLs...))
	if err != nil {
		return nil, tok, err
	}
	return c, tok, nil
}
