package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/awssdk"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/doctor"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurmconf"
	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/internal/version"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check what this install needs, one line per check (exit 1 on any failure)",
		Description: `Checks: burst.yaml is valid; the binaries at slurm.burst_bin; the Slurm release and
slurm.conf including burst.conf in sync with burst.yaml (burst-slurm-conf check's logic);
the token, CA, TLS and EC2 identity-certificate files and their modes; the state directory;
the sizer reached with the pinned CA; AWS credentials and each EC2 action burst calls
(EC2 DryRun: DryRunOperation is allowed, UnauthorizedOperation denied); the interruption
queue (one ReceiveMessage that leaves any message visible); the subnets, security groups
and AMI. Run it as the user burst-sizer serve runs as.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.StringFlag{Name: "slurm-conf", Usage: "slurm.conf to check (default: <slurm.conf_dir>/slurm.conf)"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "bound on each check that calls out"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
			if err != nil {
				r := doctor.Report{{Check: "config", Status: doctor.Fail, Detail: err.Error(), Fix: "correct burst.yaml (examples/burst.yaml comments every key)"}}
				if perr := printReport(c.App.Writer, r, c.Bool("json")); perr != nil {
					return perr
				}
				return err
			}
			r := doctor.Run(c.Context, doctorEnv(c.Context, cfg, c.String("slurm-conf"), c.Duration("timeout")))
			if err := printReport(c.App.Writer, r, c.Bool("json")); err != nil {
				return err
			}
			if _, _, fail := r.Counts(); fail > 0 {
				return cmdline.Exit(cmdline.ExitFailure, fmt.Errorf("%d check(s) failed", fail))
			}
			return nil
		},
	}
}

func printReport(w io.Writer, r doctor.Report, asJSON bool) error {
	if asJSON {
		return r.JSON(w)
	}
	return r.Print(w)
}

// doctorEnv connects the checks to the real systems.
func doctorEnv(ctx context.Context, cfg *config.Config, slurmConf string, timeout time.Duration) doctor.Env {
	if slurmConf == "" {
		slurmConf = filepath.Join(cfg.Slurm.ConfDir, "slurm.conf")
	}
	e := doctor.Env{Cfg: cfg, SlurmConf: slurmConf, Slurm: slurmInSync, Version: version.Version, Timeout: timeout}
	if hc, err := tlspin.LoadHTTPClient(cfg.Sizer.TLS.CAFile, timeout); err != nil {
		e.SizerErr = err
	} else {
		e.Sizer = &sizerHealth{url: strings.TrimRight(cfg.Sizer.URL, "/"), hc: hc}
	}
	if api, err := compose.EC2API(ctx, compose.EC2Options(cfg)); err != nil {
		e.EC2Err = err
	} else {
		e.EC2 = api
		creds := api.Options().Credentials
		e.Credentials = func(ctx context.Context) (string, error) {
			if creds == nil {
				return "", fmt.Errorf("no AWS credentials found (instance role, AWS_PROFILE, AWS_ACCESS_KEY_ID)")
			}
			v, err := creds.Retrieve(ctx)
			if err != nil {
				return "", fmt.Errorf("retrieving AWS credentials: %w", err)
			}
			return v.Source, nil
		}
	}
	if cfg.Interruptions.QueueURL != "" {
		q, err := notices.NewSQSClient(ctx, awssdk.Options{Region: cfg.Cluster.Region, Endpoint: cfg.Interruptions.SQSEndpoint, StaticCredentials: cfg.Cluster.EC2StaticCredentials})
		if err != nil {
			e.SQSErr = err
		} else {
			e.SQS = q
		}
	}
	return e
}

// slurmInSync is burst-slurm-conf check's logic: the release (slurm.version,
// else scontrol --version) and slurm.conf's differences from burst.yaml.
func slurmInSync(ctx context.Context, cfg *config.Config, slurmConf string) (string, []string, error) {
	var v slurm.Version
	var err error
	if cfg.Slurm.Version != "" {
		if v, err = slurm.ParseVersion(cfg.Slurm.Version); err != nil {
			return "", nil, fmt.Errorf("%s: slurm.version: %w", cfg.Source, err)
		}
	} else {
		// scontrol reads the slurm.conf being checked (SLURM_CONF)
		sc := slurm.NewScontrol(slurm.ScontrolOptions{BinDir: cfg.Slurm.BinDir, Conf: slurmConf, Timeout: 10 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if v, err = sc.Version(ctx); err != nil {
			return "", nil, err
		}
	}
	p, err := slurmconf.Build(cfg, catalog.Default(), v)
	if err != nil {
		return v.String(), nil, err
	}
	es, err := slurmconf.LoadFile(slurmConf)
	if err != nil {
		return v.String(), nil, err
	}
	var out []string
	for _, d := range p.Check(es) {
		out = append(out, d.String())
	}
	return v.String(), out, nil
}

type sizerHealth struct {
	url string
	hc  *http.Client
}

func (s *sizerHealth) Health(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/healthz", nil)
	if err != nil {
		return "", fmt.Errorf("building the /healthz request: %w", err)
	}
	req.Header.Set("X-Burst-Version", version.Version)
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("calling %s/healthz: %w", s.url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	body := strings.TrimSpace(string(b))
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "ok") {
		return "", fmt.Errorf("%s/healthz answered %s %q", s.url, resp.Status, body)
	}
	return strings.TrimSpace(strings.TrimPrefix(body, "ok")), nil
}
