package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/clifilter"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/iampolicy"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurmconf"
)

// ErrDrift is returned by check when slurm.conf differs from what burst needs.
var ErrDrift = errors.New("slurm.conf differs from what burst.yaml needs")

func loadPlan(c *cli.Context) (*config.Config, *slurmconf.Plan, error) {
	cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	v, err := slurmVersion(c, cfg)
	if err != nil {
		return nil, nil, err
	}
	p, err := slurmconf.Build(cfg, catalog.Default(), v)
	return cfg, p, err
}

// slurmVersion is the release to write for: --slurm-version, else
// slurm.version in burst.yaml, else what <slurm.bin_dir>/scontrol --version
// says (no daemon needed).
func slurmVersion(c *cli.Context, cfg *config.Config) (slurm.Version, error) {
	for _, s := range []struct{ v, where string }{{c.String("slurm-version"), "--slurm-version"}, {cfg.Slurm.Version, cfg.Source + ": slurm.version"}} {
		if s.v == "" {
			continue
		}
		v, err := slurm.ParseVersion(s.v)
		if err != nil {
			return v, cmdline.Usagef("%s: %v", s.where, err)
		}
		return v, nil
	}
	sc := slurm.NewScontrol(slurm.ScontrolOptions{BinDir: cfg.Slurm.BinDir, Timeout: 10 * time.Second})
	v, err := sc.Version(c.Context)
	if err != nil {
		return v, fmt.Errorf("%w; what burst writes depends on the Slurm release: set slurm.version in %s (e.g. 24.11) or pass --slurm-version", err, cfg.Source)
	}
	return v, nil
}

// App builds the CLI; output goes to out (run it with cmdline.Run).
func App(out io.Writer) *cli.App {
	app := &cli.App{
		Name:  "burst-slurm-conf",
		Usage: "write Slurm's configuration for burst's cloud GPU nodes from burst.yaml",
		Description: "Prints the slurm.conf include on standard output, or with --out writes " +
			slurmconf.IncludeName + ", " + slurmconf.GresName + " (and " + slurmconf.CliFilterName + ") into a directory.",
		Writer:          out,
		HideHelpCommand: true,
		Flags: []cli.Flag{cmdline.ConfigFlag(),
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write the files into `DIR` instead of printing the include"},
			&cli.StringFlag{Name: "slurm-version", Usage: "write for Slurm `RELEASE` (e.g. 24.11); default: slurm.version in burst.yaml, else `scontrol --version`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cmdline.Usagef("unexpected argument %q (see --help)", c.Args().First())
			}
			cfg, p, err := loadPlan(c)
			if err != nil {
				return err
			}
			dir := c.String("out")
			if dir == "" {
				_, err := out.Write(p.Include())
				return err
			}
			files, err := Files(cfg, p)
			if err != nil {
				return err
			}
			written, err := writeAll(dir, files)
			if err != nil {
				return err
			}
			for _, p := range written {
				fmt.Fprintf(out, "wrote %s\n", p)
			}
			return nil
		},
		Commands: []*cli.Command{iamCommand(out), cloudformationCommand(out), sacctmgrCommand(out), {
			Name:  "check",
			Usage: "compare an existing slurm.conf (and its includes) with what burst.yaml needs",
			Flags: []cli.Flag{&cli.StringFlag{Name: "slurm-conf", Value: "/etc/slurm/slurm.conf", Usage: "slurm.conf to check"},
				&cli.StringFlag{Name: "slurm-version", Usage: "check for Slurm `RELEASE` (default: as for writing)"}},
			Action: func(c *cli.Context) error {
				_, p, err := loadPlan(c)
				if err != nil {
					return err
				}
				es, err := slurmconf.LoadFile(c.String("slurm-conf"))
				if err != nil {
					return err
				}
				diffs := p.Check(es)
				for _, d := range diffs {
					fmt.Fprintln(out, d)
				}
				if len(diffs) > 0 {
					return cmdline.Exit(cmdline.ExitDrift, fmt.Errorf("%w: %d differences (regenerate with burst-slurm-conf --out and Include %s)", ErrDrift, len(diffs), slurmconf.IncludeName))
				}
				fmt.Fprintln(out, "slurm.conf has everything burst needs")
				return nil
			},
		}},
	}
	cmdline.AddVersion(app)
	cmdline.AcceptConfigEverywhere(app)
	cmdline.SetEnvVars(app)
	return app
}

// Files is every file --out writes, by name.
func Files(cfg *config.Config, p *slurmconf.Plan) (map[string][]byte, error) {
	files := map[string][]byte{slurmconf.IncludeName: p.Include(), slurmconf.GresName: p.GresConf()}
	if cfg.Slurm.CliFilter {
		o := clifilter.Options{SizerPath: filepath.Join(cfg.Slurm.BurstBin, "burst-sizer"), Timeout: 10 * time.Second}
		if src, err := filepath.Abs(cfg.Source); err == nil && cfg.Source != "" && src != config.DefaultPath {
			o.GlobalArgs = []string{"--config", src}
		}
		for _, part := range cfg.Slurm.Partitions {
			o.Partitions = append(o.Partitions, part.Name)
			if part.Default {
				o.DefaultPartition = part.Name
			}
		}
		lua, err := clifilter.Render(o)
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", slurmconf.CliFilterName, err)
		}
		files[slurmconf.CliFilterName] = lua
	}
	return files, nil
}

func sacctmgrCommand(out io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "sacctmgr",
		Usage: "print sacctmgr commands that make Slurm enforce burst.yaml's limits (sites with slurmdbd)",
		Description: "Association GrpTRES (gres/gpu, node) for every entry of limits: Slurm then keeps jobs over a limit pending " +
			"before a cloud node powers up; burst-resume checks the same limits itself.",
		Flags: []cli.Flag{&cli.StringFlag{Name: "cluster", Usage: "Slurm's ClusterName (default cluster.name)"}},
		Action: func(c *cli.Context) error {
			cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
			if err != nil {
				return err
			}
			cluster := c.String("cluster")
			if cluster == "" {
				cluster = cfg.Cluster.Name
			}
			_, err = out.Write(slurmconf.Sacctmgr(cfg, cluster))
			return err
		},
	}
}

func iamCommand(out io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "iam-policy",
		Usage: "print the least-privilege IAM policy of the head node's burst programs, or with --node of the nodes' instance role",
		Description: "Covers exactly the EC2 actions burst calls (checked against the EC2 emulator's record of a full run), " +
			"scoped to instances tagged " + ec2p.TagCluster + "=<cluster.name> where EC2 supports it, and, with interruptions.queue_url, " +
			"exactly the SQS actions burst-sizer's reader of EventBridge interruption events calls, on that one queue. " +
			"--node: secretsmanager:GetSecretValue on the munge secret (slurm.munge_key_source) and nothing else.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "account", Usage: "AWS account id to scope ARNs to (default any)"},
			&cli.StringFlag{Name: "pass-role", Usage: "ARN of the nodes' instance-profile role (adds iam:PassRole)"},
			&cli.BoolFlag{Name: "node", Usage: "the nodes' instance-role policy instead of the head node's"},
			&cli.StringFlag{Name: "kms-key", Usage: "with --node: the customer-managed KMS key of the munge secret (adds kms:Decrypt via Secrets Manager)"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
			if err != nil {
				return err
			}
			if c.Bool("node") {
				doc, err := iampolicy.RenderNode(cfg.Slurm.MungeKeySource, iampolicy.NodeOptions{KMSKeyARN: c.String("kms-key")})
				if err != nil {
					return cmdline.Usage(err)
				}
				_, err = out.Write(doc)
				return err
			}
			var queue string
			if q, ok := cfg.Interruptions.Queue(); ok {
				queue = q.ARN("")
			}
			doc, err := iampolicy.Render(ec2p.TagCluster, cfg.Cluster.Name, iampolicy.Options{
				Region: cfg.Cluster.Region, Account: c.String("account"), PassRoleARN: c.String("pass-role"), InterruptionQueueARN: queue})
			if err != nil {
				return cmdline.Usage(err)
			}
			_, err = out.Write(doc)
			return err
		},
	}
}
