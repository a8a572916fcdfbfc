package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cloudFragment is a two-node cloud partition with 2 fake A10G GPUs each, a
// ResumeProgram that records each request under {{DIR}}/resume-requests
// (the test plays the cloud and boots the slurmd), and a PrologSlurmctld
// that returns once the job's nodes are up (so the job launches at once
// instead of on slurmctld's 30 s periodic pass).
const cloudFragment = `
NodeName=gpu-[1-2] CPUs=1 RealMemory=1000 State=CLOUD Feature=g5.xlarge,a10g Gres=gpu:a10g:2
PartitionName=cloud Nodes=gpu-[1-2] Default=YES MaxTime=INFINITE State=UP
ResumeProgram={{DIR}}/bin/resume.sh
PrologSlurmctld={{DIR}}/bin/prolog.sh
SuspendTime=600
ResumeTimeout=60
`

const cloudGres = "AutoDetect=off\nNodeName=gpu-[1-2] Name=gpu Type=a10g File={{DEVDIR}}/nvidia[0-1]\n"

// Hooks are run by slurmctld with no PATH and SIGTERM blocked; the
// ResumeProgram gets SLURM_CONF and SLURM_RESUME_FILE.
const resumeScript = `#!/bin/sh
export PATH=/usr/bin:/bin
d=%[1]s/resume-requests
mkdir -p $d
{ echo "$1"; echo "$SLURM_CONF"; cat "$SLURM_RESUME_FILE"; } > $d/.$$.tmp && mv $d/.$$.tmp $d/$(date +%%s%%N).req
`

// PrologSlurmctld gets neither PATH nor SLURM_CONF (22.05.8, observed).
const prologScript = `#!/bin/sh
export PATH=/usr/bin:/bin SLURM_CONF=%[1]s
i=0
while [ $i -lt 600 ]; do
  n=$(scontrol show node -o "$SLURM_JOB_NODELIST" | grep -o 'State=[^ ]*' | grep -c -E 'POWER|NOT_RESPONDING')
  [ "$n" = 0 ] && exit 0
  i=$((i+1)); sleep 0.2
done
exit 0
`

func writeHooks(c *Cluster) error {
	bin := filepath.Join(c.Dir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bin, "resume.sh"), []byte(fmt.Sprintf(resumeScript, c.Dir())), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bin, "prolog.sh"), []byte(fmt.Sprintf(prologScript, c.ConfPath())), 0o755)
}

func cloudOptions() Options {
	return Options{Fragment: cloudFragment, GresConf: cloudGres, GPUs: 2, Prepare: writeHooks}
}

// resumeWatcher plays the cloud provider: for every request the
// ResumeProgram records, it boots a slurmd per node (after the harness's
// 2 s boot delay). It returns the resume files it saw.
type resumeWatcher struct {
	mu    sync.Mutex
	files []string
	errs  []error
}

func watchResume(ctx context.Context, t *testing.T, c *Cluster) *resumeWatcher {
	w := &resumeWatcher{}
	dir := filepath.Join(c.Dir(), "resume-requests")
	seen := map[string]bool{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			reqs, _ := filepath.Glob(filepath.Join(dir, "*.req"))
			for _, r := range reqs {
				if seen[r] {
					continue
				}
				seen[r] = true
				b, err := os.ReadFile(r)
				if err != nil {
					continue
				}
				hostlist, rest, _ := strings.Cut(string(b), "\n")
				conf, resumeFile, _ := strings.Cut(rest, "\n")
				if conf != c.ConfPath() {
					w.mu.Lock()
					w.errs = append(w.errs, fmt.Errorf("ResumeProgram got SLURM_CONF=%q, want %q", conf, c.ConfPath()))
					w.mu.Unlock()
				}
				out, err := c.Run(ctx, "scontrol", "show", "hostnames", hostlist)
				w.mu.Lock()
				w.files = append(w.files, strings.TrimSpace(resumeFile))
				if err != nil {
					w.errs = append(w.errs, err)
				}
				w.mu.Unlock()
				for _, n := range strings.Fields(out) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := c.StartSlurmd(ctx, n, netip.Addr{}); err != nil && ctx.Err() == nil {
							w.mu.Lock()
							w.errs = append(w.errs, err)
							w.mu.Unlock()
						}
					}()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { <-done; wg.Wait() })
	return w
}

func (w *resumeWatcher) check(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Errorf("booting node: %v", err)
	}
	return append([]string(nil), w.files...)
}

func TestCloudNodesIdlePoweredDown(t *testing.T) {
	c := New(t, cloudOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N|%T|%G|%f|%P")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"gpu-1|idle~|gpu:a10g:2|g5.xlarge,a10g|cloud*", "gpu-2|idle~|gpu:a10g:2|g5.xlarge,a10g|cloud*"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("sinfo:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	// The generated slurm.conf must not repeat keys the fragment set.
	conf, err := os.ReadFile(c.ConfPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ResumeProgram=", "SuspendTime=", "ResumeTimeout=", "PrologSlurmctld="} {
		for _, l := range strings.Split(string(conf), "\n") {
			if strings.HasPrefix(l, k) {
				t.Errorf("slurm.conf sets %q although the fragment does: %q", k, l)
			}
		}
	}
	if !strings.Contains(string(conf), "SuspendProgram=/bin/true") {
		t.Errorf("slurm.conf lacks the default SuspendProgram:\n%s", conf)
	}
	// The controller listens on the bridge address.
	port, _ := c.Ports()
	conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(c.ControllerAddr(), uint16(port)).String(), 5*time.Second)
	if err != nil {
		t.Errorf("slurmctld not reachable on the bridge address: %v", err)
	} else {
		conn.Close()
	}
}

func TestResumeProgramBootsNodeAndJobCompletes(t *testing.T) {
	c := New(t, cloudOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := watchResume(ctx, t, c)
	t0 := time.Now()
	job, err := c.Sbatch(ctx, "--gres=gpu:2", "--wrap", "hostname; echo node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, job, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	t.Logf("job %s: sbatch -> COMPLETED in %.1f s (includes the 2 s boot delay)", job, time.Since(t0).Seconds())
	files := w.check(t)
	if len(files) != 1 || !strings.Contains(files[0], fmt.Sprintf(`"job_id":%s`, job)) {
		t.Errorf("resume files %q: want one naming job %s", files, job)
	}
	out, err := os.ReadFile(filepath.Join(c.Dir(), "work", "slurm-"+job+".out"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "node=gpu-1 gpus=0,1") && !strings.Contains(string(out), "node=gpu-2 gpus=0,1") {
		t.Errorf("job output %q: want node=gpu-N gpus=0,1", out)
	}
	nodes := c.Nodes()
	if len(nodes) != 1 {
		t.Fatalf("running nodes %v, want exactly one booted", nodes)
	}
	st, err := c.NodeState(ctx, nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	if st != "idle" {
		t.Errorf("node %s state %q after the job, want idle", nodes[0], st)
	}
	// NodeAddr comes from the registration address (cloud_reg_addrs).
	n, _ := c.Node(nodes[0])
	show, err := c.Run(ctx, "scontrol", "show", "node", "-o", nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(show, "NodeAddr="+n.IP.String()+" ") {
		t.Errorf("node %s: want NodeAddr=%s in %q", nodes[0], n.IP, show)
	}
}

// TestStopLeavesNothing runs a job, a slurmd and an extra node process, stops
// the cluster and checks that no process, namespace, link or file is left.
func TestStopLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPING REAL-SLURM TEST in -short mode (make test-unit starts no daemon)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING REAL-SLURM TEST: needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, cloudOptions())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=gpu-2", "state=POWER_UP"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSlurmd(ctx, "gpu-2", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "gpu-2", "idle"); err != nil {
		t.Fatal(err)
	}
	job, err := c.Sbatch(ctx, "-w", "gpu-2", "--wrap", "sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, job, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	if err := c.NodeExec(ctx, "gpu-2", "/bin/sleep", "300"); err != nil {
		t.Fatal(err)
	}
	conf, dir, id := c.ConfPath(), c.Dir(), c.ID()
	net := c.Network()
	if got := pidsWithEnv("SLURM_CONF=" + conf); len(got) < 4 { // slurmctld, munged, slurmd, slurmstepd, job, sleep
		t.Fatalf("expected the cluster's processes to carry SLURM_CONF before Stop, found %v", got)
	}
	t0 := time.Now()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("Stop took %.2f s", time.Since(t0).Seconds())
	if left := pidsWithEnv("SLURM_CONF=" + conf); len(left) > 0 {
		for _, p := range left {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
			t.Errorf("process %d (%s) left after Stop", p, strings.TrimSpace(string(comm)))
		}
	}
	out, err := runIP("netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, Prefix+"-"+id+"-") {
		t.Errorf("namespace left after Stop: %s", out)
	}
	links, err := runIP("-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(links, Prefix+id) || strings.Contains(links, net.Bridge) {
		t.Errorf("link left after Stop:\n%s", links)
	}
	for _, p := range []string{dir, filepath.Join(stateDir, id+".json"), filepath.Join(stateDir, "subnet-"+strings.TrimSuffix(net.Prefix.Addr().String(), ".0"))} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after Stop", p)
		}
	}
}

func runIP(args ...string) (string, error) {
	ip, err := findIP()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(ip, args...).CombinedOutput()
	return string(out), err
}

func TestNodeAddresses(t *testing.T) {
	c := New(t, Options{Fragment: "NodeName=n[1-2] CPUs=1 State=CLOUD\nPartitionName=p Nodes=n[1-2] State=UP\n", GPUs: 1})
	ctx := context.Background()
	ip, err := c.AllocIP()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Network().Prefix.Contains(ip) || ip == c.ControllerAddr() {
		t.Fatalf("AllocIP = %s outside %s or the controller's", ip, c.Network().Prefix)
	}
	n, err := c.StartNode(ctx, "n1", ip, "/bin/sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	if n.IP != ip {
		t.Errorf("node IP %s, want %s", n.IP, ip)
	}
	if _, err := c.StartNode(ctx, "n2", ip); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("second node on %s: %v, want already used", ip, err)
	}
	if _, err := c.StartNode(ctx, "n1", netip.Addr{}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("n1 twice: %v", err)
	}
	if _, err := c.StartNode(ctx, "n2", netip.MustParseAddr("192.168.1.5")); err == nil {
		t.Error("address outside the subnet accepted")
	}
	// The node reaches the controller over the bridge, from its own namespace.
	cmd, err := c.NodeCommand(ctx, "n1", c.opts.BinDir+"/scontrol", "ping")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is UP") {
		t.Errorf("scontrol ping from node namespace: %v: %s", err, out)
	}
	if err := c.StopNode("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.Netns()); err == nil {
		t.Errorf("namespace %s left after StopNode", n.Netns())
	}
	if _, err := c.StartNode(ctx, "n2", ip); err != nil {
		t.Errorf("address not reusable after StopNode: %v", err)
	}
}

func TestRestAPI(t *testing.T) {
	c := New(t, Options{Fragment: "NodeName=n1 CPUs=1 State=CLOUD\nPartitionName=p Nodes=n1 State=UP\n", GPUs: 1, RestAPI: true})
	v := c.Slurm().RestVersion()
	for _, path := range []string{"/slurm/" + v + "/ping", "/slurm/" + v + "/nodes"} {
		resp, err := c.RestClient().Get("http://slurm" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		if strings.HasSuffix(path, "/nodes") && !strings.Contains(string(body), `"name": "n1"`) {
			t.Errorf("GET %s: node n1 missing from %s", path, body)
		}
	}
}
