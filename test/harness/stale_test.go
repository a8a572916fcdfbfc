package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrashedRunHelper is not a test: TestCleanupStale runs it in a child
// process that starts a cluster with a node, prints its details and waits to
// be SIGKILLed, leaving everything behind like a crashed go test.
func TestCrashedRunHelper(t *testing.T) {
	if os.Getenv("BURST_HARNESS_CRASH_HELPER") != "1" {
		t.Skip("helper process for TestCleanupStale")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Fragment: "NodeName=n1 CPUs=1 State=CLOUD\nPartitionName=p Nodes=n1 State=UP\n", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartNode(ctx, "n1", netip.Addr{}, "/bin/sleep", "600"); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("READY %s %s %s\n", c.ID(), c.ConfPath(), c.Dir())
	time.Sleep(10 * time.Minute)
}

func TestCleanupStale(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPING REAL-SLURM TEST in -short mode (make test-unit starts no daemon)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING REAL-SLURM TEST: needs root")
	}
	// A live cluster of this process must survive CleanupStale.
	live := New(t, Options{Fragment: "NodeName=n1 CPUs=1 State=CLOUD\nPartitionName=p Nodes=n1 State=UP\n", GPUs: 1})
	if _, err := live.StartNode(context.Background(), "n1", netip.Addr{}, "/bin/sleep", "600"); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashedRunHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "BURST_HARNESS_CRASH_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id, conf, dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "READY" {
			id, conf, dir = f[1], f[2], f[3]
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if id == "" {
		t.Fatal("crash helper did not start a cluster")
	}
	if len(pidsWithEnv("SLURM_CONF="+conf)) < 3 {
		t.Fatalf("crashed run left fewer processes than expected (slurmctld, munged, node)")
	}
	removed, err := CleanupStale(context.Background(), nil)
	if err != nil {
		t.Errorf("CleanupStale: %v", err)
	}
	t.Logf("CleanupStale removed %q", removed)
	if left := pidsWithEnv("SLURM_CONF=" + conf); len(left) > 0 {
		t.Errorf("processes %v of the crashed run left", left)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("run dir %s left", dir)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, Prefix+"-"+id+"-n1")); err == nil {
		t.Errorf("namespace of the crashed run left")
	}
	links, _ := runIP("-o", "link", "show")
	if strings.Contains(links, Prefix+id) {
		t.Errorf("links of the crashed run left:\n%s", links)
	}
	// The live cluster is untouched.
	n, ok := live.Node("n1")
	if !ok {
		t.Fatal("live node gone")
	}
	if _, err := os.Stat(n.Netns()); err != nil {
		t.Errorf("CleanupStale removed the live run's namespace: %v", err)
	}
	if _, err := live.Run(context.Background(), "scontrol", "ping"); err != nil {
		t.Errorf("live cluster broken by CleanupStale: %v", err)
	}
}

func TestConfKeysOverride(t *testing.T) {
	frag := `# comment ResumeProgram=x
resumeprogram=/opt/burst/bin/burst-resume
SlurmctldParameters=cloud_reg_addrs  # trailing comment
NodeName=gpu-[1-2] State=CLOUD
  SuspendTime=30
`
	keys := confKeys(frag)
	for _, k := range []string{"resumeprogram", "slurmctldparameters", "nodename", "suspendtime"} {
		if !keys[k] {
			t.Errorf("confKeys missed %s: %v", k, keys)
		}
	}
	if keys["suspendprogram"] {
		t.Errorf("confKeys invented suspendprogram")
	}
	c := &Cluster{id: "abc123", name: "x", hostname: "h", dir: "/d", opts: Options{Debug: "info"}}
	c.net.Gateway = netip.MustParseAddr("10.1.2.1")
	conf := c.baseConf(frag)
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasPrefix(strings.ToLower(line), "resumeprogram=") || strings.HasPrefix(line, "SlurmctldParameters=") || strings.HasPrefix(line, "SuspendTime=") {
			t.Errorf("base conf repeats a fragment key: %q", line)
		}
	}
	if !strings.Contains(conf, "SuspendProgram=/bin/true\n") || !strings.Contains(conf, "SlurmctldHost=h(10.1.2.1)\n") ||
		!strings.HasSuffix(conf, "Include /d/etc/fragment.conf\n") {
		t.Errorf("base conf:\n%s", conf)
	}
}
