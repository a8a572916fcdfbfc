package cmd

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/sizer/store"
)

func storeCommand() *cli.Command {
	return &cli.Command{
		Name:  "store",
		Usage: "the sizer's database: migrate its schema, copy SQLite to PostgreSQL",
		Subcommands: []*cli.Command{{
			Name:  "migrate",
			Usage: "bring sizer.store's schema to this version's (serve does it too on start)",
			Action: func(c *cli.Context) error {
				st, err := loadSettings(c)
				if err != nil {
					return err
				}
				s, err := store.OpenConfig(c.Context, storeConfig(st.cfg), store.WithoutGroupCommit())
				if err != nil {
					return err
				}
				defer s.Close()
				cur, newest, err := s.SchemaVersion(c.Context)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.App.Writer, "%s store %s: schema version %d (newest %d)\n", s.Driver(), s.Path(), cur, newest)
				return err
			},
		}, {
			Name:  "copy",
			Usage: "copy the SQLite database in sizer.state_dir (or --from) into sizer.store's empty PostgreSQL, checking every row arrived",
			Description: `Stop burst-sizer first. The SQLite file is migrated to this version's schema, then every row of
every table is copied in one transaction, and each table is checked: the same row count and the
same SHA-256 of its rows on both sides. The destination must be empty (as store migrate leaves it).`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "from", Usage: "the SQLite state directory (default sizer.state_dir)"},
				&cli.BoolFlag{Name: "json", Usage: "print the per-table report as JSON"},
			},
			Action: func(c *cli.Context) error {
				st, err := loadSettings(c)
				if err != nil {
					return err
				}
				to := storeConfig(st.cfg)
				if to.Driver != store.DriverPostgres {
					return fmt.Errorf("store copy: sizer.store.driver is %q: set driver: postgres and its url (the destination) in the config", to.Driver)
				}
				from := c.String("from")
				if from == "" {
					from = st.cfg.Sizer.StateDir
				}
				// rows from before clusters were kept become this cluster's, as
				// on the sizer's own first migration
				src, err := store.Open(c.Context, from, store.WithoutGroupCommit(), store.ForCluster(st.cfg.Cluster.Name))
				if err != nil {
					return fmt.Errorf("store copy: opening the source: %w", err)
				}
				defer src.Close()
				dst, err := store.OpenConfig(c.Context, to, store.WithoutGroupCommit())
				if err != nil {
					return fmt.Errorf("store copy: opening the destination: %w", err)
				}
				defer dst.Close()
				rep, err := store.Copy(c.Context, src, dst)
				if c.Bool("json") && rep != nil {
					if jerr := json.NewEncoder(c.App.Writer).Encode(rep); jerr != nil {
						return jerr
					}
				} else if rep != nil {
					tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "TABLE\tROWS\tCOPIED\tSHA-256")
					for _, t := range rep {
						fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.Table, t.Rows, t.Copied, t.Checksum[:16])
					}
					tw.Flush()
				}
				if err != nil {
					return fmt.Errorf("store copy %s -> %s: %w", src.Path(), dst.Path(), err)
				}
				return nil
			},
		}},
	}
}
