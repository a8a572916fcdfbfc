package simulate

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

// learningCommand is `burst-sizer simulate learning`: what learning from
// measured use saves over sizing from the request alone, on a trace with
// the stated synthetic model of use (LearningModel).
func learningCommand() *cli.Command {
	d := DefaultLearningModel()
	return &cli.Command{
		Name:      "learning",
		Usage:     "replay a trace through the sizing policy with and without the history of each recurring job",
		ArgsUsage: " ",
		Description: `Traces record what jobs asked for, not what they used, so use comes from a
stated synthetic model: jobs of the same GPU count, run-time bucket and day are
runs of one recurring job; --underuse of recurring jobs keep --underuse-fraction
of their GPUs busy; --oom of them run out of GPU memory when sized from the request.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trace", Usage: "trace `FILE` (- for stdin); required"},
			&cli.StringFlag{Name: "format", Value: trace.FormatAuto, Usage: "trace format: auto, philly, csv or sacct"},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip malformed trace rows"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			&cli.StringFlag{Name: "gpu-model", Value: "any", Usage: "GRES type for jobs whose trace names no GPU; any lets the sizer choose (a job that ran out of memory can then move to a larger GPU)"},
			&cli.IntFlag{Name: "learn-after", Value: 2, Usage: "measured runs before a recurring job is sized down (burst.yaml sizing.learn_after_runs)"},
			&cli.Float64Flag{Name: "underuse", Value: d.UnderuseShare, Usage: "share of recurring jobs that keep few of their GPUs busy"},
			&cli.Float64Flag{Name: "underuse-fraction", Value: d.UnderuseFraction, Usage: "share of their GPUs those keep busy"},
			&cli.Float64Flag{Name: "oom", Value: d.OOMShare, Usage: "share of recurring jobs that run out of GPU memory when sized from the request"},
		},
		Action: func(c *cli.Context) error {
			if c.String("trace") == "" {
				return cli.Exit("simulate learning: --trace is required", 2)
			}
			m := DefaultLearningModel()
			m.UnderuseShare, m.UnderuseFraction, m.OOMShare = c.Float64("underuse"), c.Float64("underuse-fraction"), c.Float64("oom")
			if m.UnderuseShare < 0 || m.UnderuseShare > 1 || m.UnderuseFraction <= 0 || m.UnderuseFraction > 1 || m.OOMShare < 0 || m.OOMShare > 1 {
				return cli.Exit("simulate learning: --underuse and --oom must be in 0..1, --underuse-fraction in (0, 1]", 2)
			}
			in, closeIn, err := openIn(c.String("trace"))
			if err != nil {
				return err
			}
			defer closeIn()
			jobs, _, err := trace.ReadAny(in, c.String("format"), trace.ReadOptions{SkipBad: c.Bool("skip-bad")})
			if err != nil {
				return fmt.Errorf("reading %s: %w", c.String("trace"), err)
			}
			model := c.String("gpu-model")
			if model == "any" {
				model = ""
			}
			rep, err := SimulateLearning(jobs, catalog.Default(), model, m, c.Int("learn-after"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, rep)
			}
			_, err = fmt.Fprint(c.App.Writer, FormatLearning(rep))
			return err
		},
	}
}
