package simulate_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/sizer/simulate"
)

// Registering the command in a program and running it on a four-job trace
// in burst's simple CSV format (submit seconds, duration, GPUs), with a
// fixed two-minute boot so the figures can be checked by hand.
func ExampleCommand() {
	dir, err := os.MkdirTemp("", "simulate-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	tr := filepath.Join(dir, "trace.csv")
	os.WriteFile(tr, []byte("submit,duration,gpus\n0,3600,1\n1800,3600,1\n4000,1800,1\n7200,7200,8\n"), 0o644)

	app := &cli.App{Name: "burst-sizer", Writer: os.Stdout, Commands: []*cli.Command{simulate.Command()}}
	err = app.Run([]string{"burst-sizer", "simulate", "--trace", tr, "--boot-sigma", "0", "--spot-dry", "0"})
	fmt.Println("error:", err)
	// Output:
	// policy  cost USD  GPU-h billed  GPU-h used  idle GPU-h  lost GPU-h  wait p50   p95   p99  warm starts  launches  spot GPU-h  interrupts  warm pool USD  vs static  vs idle-timeout
	//         static    $65.15         32.00       18.50       13.50        0.00        2s    2s    2s            -         1          0%           0              -      +0.0%           -67.7%
	//   idle-timeout    $38.84         20.58       18.50        2.08        0.00      2.0m  2.0m  2.0m          25%         3          0%           0              -     +40.4%            +0.0%
	//          burst    $11.09         19.76       18.50        1.26        0.00      2.0m  2.0m  2.0m           0%         6        100%           0          $0.22     +83.0%           +71.4%
	//
	// 4 jobs over 0.2 days; GPU model a10g; boot fixed 2.0m; idle timeout 10.0m; warm window 2.0m; checkpoint 30.0m (on notice: false); interruptions advisor; spot dry 0% per pool, 1 zone(s); on-demand after 3 interruptions without progress; avoid interrupted pool false; seed 1
	// burst warm pool: 0.95-quantile (raised while a class's misses exceed 0.05) of Poisson node demand in one 2.0m lead time; rate = 0.50 x hour-of-week profile + 0.50 x recent rate (half-life 30.0m); cap $100 per class per day; scheduling delay 2s
	// static cluster: 1 x g5.48xlarge (95%-ile of concurrent GPU demand), FIFO with greedy backfill
	// error: <nil>
}
