package harness_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/burst-hpc/burst/test/harness"
)

// Wiring the harness to an external "cloud": burst's slurm.conf fragment
// names burst-resume as ResumeProgram; burst-resume asks the EC2 emulator for
// instances; the emulator's instance-start hook boots the node's slurmd in
// the harness, and its terminate hook stops it.
func Example() {
	ctx := context.Background()
	c, err := harness.Start(ctx, harness.Options{
		Fragment: "NodeName=gpu-[1-4] CPUs=1 RealMemory=1000 State=CLOUD Feature=g5.xlarge Gres=gpu:a10g:1\n" +
			"PartitionName=cloud Nodes=gpu-[1-4] Default=YES State=UP\n" +
			"ResumeProgram=/usr/local/bin/burst-resume\nSuspendProgram=/usr/local/bin/burst-suspend\n",
		GresConf: "AutoDetect=off\nNodeName=gpu-[1-4] Name=gpu Type=a10g File={{DEVDIR}}/nvidia0\n",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop()

	// The emulator picks the instance's private IP from the harness subnet.
	onInstanceStart := func(ctx context.Context, node string) (netip.Addr, error) {
		ip, err := c.AllocIP()
		if err != nil {
			return ip, err
		}
		go func() { _, _ = c.StartSlurmd(context.Background(), node, ip) }() // boots after the 2 s delay
		return ip, nil
	}
	onInstanceTerminate := func(node string) error { return c.StopNode(node) }
	_, _ = onInstanceStart, onInstanceTerminate

	job, _ := c.Sbatch(ctx, "--gres=gpu:1", "--wrap", "hostname")
	_, _ = c.WaitJobState(ctx, job, "COMPLETED")
}
