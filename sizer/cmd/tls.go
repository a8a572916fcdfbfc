package cmd

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/sizer/tlsca"
)

func tlsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tls",
		Usage: "manage the sizer's HTTPS certificate",
		Subcommands: []*cli.Command{{
			Name: "init",
			Usage: "create the sizer's CA (sizer.tls.ca_file: pinned by every client, public) and a server certificate for " +
				"sizer.tls.hosts (default: the hosts of sizer.url and sizer.listen); keys 0600 in the state directory",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "renew", Usage: "reissue the server certificate with the existing CA (clients keep their pin)"},
				&cli.BoolFlag{Name: "force", Usage: "replace everything, CA included (every client then needs the new CA file)"},
			},
			Action: func(c *cli.Context) error {
				st, err := loadSettings(c)
				if err != nil {
					return err
				}
				s := st.cfg.Sizer
				res, err := tlsca.Init(tlsca.Options{
					Paths: tlsca.Paths{CAFile: s.TLS.CAFile, CAKey: s.CAKeyPath(), CertFile: s.CertPath(), KeyFile: s.KeyPath()},
					Hosts: s.CertHosts(), Force: c.Bool("force"), Renew: c.Bool("renew"), Cluster: st.cfg.Cluster.Name,
				})
				if err != nil {
					return err
				}
				for _, p := range res.Wrote {
					fmt.Fprintf(c.App.Writer, "wrote %s\n", p)
				}
				b, err := os.ReadFile(s.TLS.CAFile)
				if err != nil {
					return err
				}
				cas, err := tlspin.ParseCA(b)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "server certificate for %v; clients pin %s (SHA-256 %s)\n", res.Hosts, s.TLS.CAFile, tlspin.Fingerprint(cas[0]))
				return nil
			},
		}},
	}
}
