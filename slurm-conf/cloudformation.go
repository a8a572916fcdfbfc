package main

import (
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cfntemplate"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
)

// slurmdPort is slurmd's port on the nodes (Slurm's default SlurmdPort;
// burst.conf does not change it).
const slurmdPort = 6818

func cloudformationCommand(out io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "cloudformation",
		Usage: "print the CloudFormation template (JSON) of everything burst needs on AWS",
		Description: "The head node's managed policy (the statements of iam-policy, with the stack's queue and node role), " +
			"the node role (iam-policy --node) and instance profile, the interruption queue with its queue policy and the " +
			"EventBridge rules for spot interruption warnings, rebalance recommendations and state changes, and the head-node " +
			"and node security groups (slurmctld, burst-sizer, slurmd, node to node); with --fsx-s3 also FSx for Lustre and an " +
			"S3 data repository association for checkpoints and artifacts. Deploy it with `aws cloudformation deploy` " +
			"(parameter VpcId, and FSxSubnetId with --fsx-s3) and copy the stack's outputs into burst.yaml.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "fsx-s3", Usage: "add FSx for Lustre linked to `S3PATH` (s3://bucket/prefix) for checkpoints and artifacts"},
			&cli.StringFlag{Name: "fsx-path", Value: "/burst", Usage: "with --fsx-s3: the file system `PATH` linked to S3"},
			&cli.IntFlag{Name: "fsx-capacity", Value: 1200, Usage: "with --fsx-s3: storage in `GiB` (1200 or a multiple of 2400)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cmdline.Usagef("unexpected argument %q (see --help)", c.Args().First())
			}
			cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
			if err != nil {
				return err
			}
			t, err := cfntemplate.Build(cfntemplate.Options{ClusterTagKey: ec2p.TagCluster, Cluster: cfg.Cluster.Name,
				Region: cfg.Cluster.Region, MungeKeySource: cfg.Slurm.MungeKeySource, ControllerPort: cfg.Slurm.ControllerPort,
				SlurmdPort: slurmdPort, SizerListen: cfg.Sizer.Listen,
				FSxS3: c.String("fsx-s3"), FSxPath: c.String("fsx-path"), FSxCapacity: c.Int("fsx-capacity")})
			if err != nil {
				return cmdline.Usage(err)
			}
			_, err = out.Write(t)
			return err
		},
	}
}
