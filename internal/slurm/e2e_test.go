package slurm_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/<release>/ from the real cluster (TestCaptureSamples)")

// e2eFragment: the nodes of the fixture scenario (fixtures_test.go). The
// ResumeProgram keeps a copy of each SLURM_RESUME_FILE (slurmctld removes
// it once the program has run).
const e2eFragment = `
NodeName=gpu-[1-6] CPUs=2 RealMemory=1000 State=CLOUD Feature=g5.xlarge,a10g Gres=gpu:a10g:2
NodeName=big-1 CPUs=2 RealMemory=1000 State=CLOUD Feature=p4d.24xlarge,a100 Gres=gpu:a100:8
PartitionName=cloud Nodes=gpu-[1-6],big-1 Default=YES MaxTime=INFINITE State=UP
SuspendTime=600
ResumeTimeout=600
ResumeProgram={{DIR}}/work/keep-resume-file
MaxJobCount=120000
`

const e2eGres = "AutoDetect=off\nNodeName=gpu-[1-6] Name=gpu Type=a10g File={{DEVDIR}}/nvidia[0-1]\nNodeName=big-1 Name=gpu Type=a100 File={{DEVDIR}}/nvidia[0-7]\n"

func startCluster(t testing.TB) *harness.Cluster {
	return harness.New(t, harness.Options{Fragment: e2eFragment, GresConf: e2eGres, GPUs: 8, RestJWT: true, Prepare: func(c *harness.Cluster) error {
		dir := filepath.Join(c.Dir(), "work")
		if err := os.MkdirAll(filepath.Join(dir, "resume"), 0o755); err != nil {
			return err
		}
		// slurmctld runs it without PATH
		script := "#!/bin/sh\n/bin/cat \"$SLURM_RESUME_FILE\" > " + dir + "/resume/$(/bin/date +%s%N).json\n"
		return os.WriteFile(filepath.Join(dir, "keep-resume-file"), []byte(script), 0o755)
	}})
}

func capture(t *testing.T, c *harness.Cluster, ctx context.Context, name string, args ...string) []byte {
	t.Helper()
	out, err := c.Run(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(out)
}

// clusterVersion is the release of the cluster's Slurm tools.
func clusterVersion(t testing.TB, c *harness.Cluster) slurm.Version {
	t.Helper()
	out, err := c.Run(context.Background(), "scontrol", "--version")
	if err != nil {
		t.Fatal(err)
	}
	v, err := slurm.ParseVersion(out)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCaptureSamples runs the fixture scenario (fixtures_test.go) on the real
// daemons and, with -update, writes what they print to testdata/<release>/.
func TestCaptureSamples(t *testing.T) {
	if !*update {
		t.Skip("only with -update")
	}
	c := startCluster(t)
	v := clusterVersion(t, c)
	rel := fmt.Sprintf("%02d.%02d", v.Major, v.Minor)
	t.Logf("Slurm %s: writing testdata/%s/", v, rel)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sbatch := func(args ...string) string {
		t.Helper()
		id, err := c.Sbatch(ctx, append(args, "-o", "/dev/null")...)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	run := func(name string, args ...string) {
		t.Helper()
		if _, err := c.Run(ctx, name, args...); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id string, states ...string) {
		t.Helper()
		if _, err := c.WaitJobState(ctx, id, states...); err != nil {
			t.Fatal(err)
		}
	}
	sbatch("-J", "train-7b", "--gres=gpu:a10g:2", "--comment", "burst: params=7B ckpt=/fsx/ck", "-C", "a10g", "--mem=500", "-t", "30", "--requeue", "--begin=now+1hour", "--wrap", "sleep 100")
	sbatch("-J", "gpus-per-job", "--gpus=2", "--mem-per-cpu=100", "--hold", "--no-requeue", "--wrap", "true")
	sbatch("-J", "sweep", "--array=0-3", "--hold", "--gres=gpu:1", "--wrap", "true")
	run("scontrol", "update", "nodename=gpu-1", "state=POWER_UP")
	if _, err := c.StartSlurmd(ctx, "gpu-1", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "gpu-1", "idle"); err != nil {
		t.Fatal(err)
	}
	wait(sbatch("-J", "done", "-w", "gpu-1", "--gres=gpu:1", "--wrap", "true"), "COMPLETED")
	wait(sbatch("-J", "running", "-w", "gpu-1", "-c", "2", "--gres=gpu:a10g:1", "--wrap", "sleep 3000"), "RUNNING")
	// powers gpu-2 up and waits for it: nothing starts its slurmd
	wait(sbatch("-J", "booting", "-w", "gpu-2", "--gres=gpu:a10g:2", "-t", "60", "--wrap", "sleep 10"), "CONFIGURING")
	multi := []string{"-J", "multi", "-N2", "-w", "gpu-[3-4]", "--gres=gpu:a10g:2", "--wrap", "sleep 10"}
	if v.AtLeast(23, 2) {
		multi = append(multi, "--extra", "burst=1")
	}
	wait(sbatch(multi...), "CONFIGURING")
	if v.AtLeast(23, 11) {
		run("scontrol", "update", "nodename=gpu-1", "instanceid=i-0123456789abcdef0", "instancetype=g5.xlarge")
	}
	run("scontrol", "update", "nodename=big-1", "state=DRAIN", "reason=capacity test")
	run("scontrol", "update", "nodename=big-1", "comment=i-0abc", `extra={"instance_id":"i-0abc"}`)
	time.Sleep(2 * time.Second) // let slurmctld run the ResumePrograms

	j, err := slurm.JSONFlag(v)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"version.txt":       capture(t, c, ctx, "scontrol", "--version"),
		"squeue.json":       capture(t, c, ctx, "squeue", j, "-t", "all"),
		"squeue-j.json":     capture(t, c, ctx, "squeue", j, "-t", "all", "-j", "6,7,999999"),
		"squeue-states.txt": capture(t, c, ctx, "squeue", "-h", "-t", "all", "-o", "%A|%T|%D|%N|%r"),
	}
	if v.AtLeast(23, 2) {
		files["scontrol-show-job.json"] = capture(t, c, ctx, "scontrol", j, "show", "job", "6")
		files["scontrol-show-node.json"] = capture(t, c, ctx, "scontrol", j, "show", "node")
		files["scontrol-show-node-named.json"] = capture(t, c, ctx, "scontrol", j, "show", "node", "gpu-2,big-1,nope-1")
		files["sinfo.json"] = capture(t, c, ctx, "sinfo", j)
		files["squeue-default.json"] = capture(t, c, ctx, "squeue", "--json", "-t", "all")
	} else {
		files["sinfo.json"] = capture(t, c, ctx, "sinfo", "--json")
		files["scontrol-show-node.txt"] = capture(t, c, ctx, "scontrol", "show", "node", "-o", "-d")
		// exits 1 for the unknown node, printing the others
		out, _ := c.Run(ctx, "scontrol", "show", "node", "-o", "-d", "gpu-2,big-1,nope-1")
		files["scontrol-show-node-named.txt"] = []byte(out)
	}
	restFiles, status := captureREST(t, c, ctx, v)
	for name, b := range restFiles {
		files[name] = b
	}
	files["rest-status.txt"] = status
	kept, err := filepath.Glob(filepath.Join(c.Dir(), "work", "resume", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kept)
	for i, p := range kept {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("resume-%d.json", i+1)] = b
	}
	dir := filepath.Join("testdata", rel)
	old, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// captureREST asks the cluster's slurmrestd (JWT, the data version burst
// speaks on the release) what burst asks it, errors included, and returns
// each answer's body by fixture name, and "name status" lines.
func captureREST(t *testing.T, c *harness.Cluster, ctx context.Context, v slurm.Version) (map[string][]byte, []byte) {
	t.Helper()
	key, err := os.ReadFile(c.JWTKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	dv := c.Slurm().RestVersion()
	slash := "/"
	if dv == "v0.0.38" {
		slash = ""
	}
	files := map[string][]byte{}
	var status strings.Builder
	do := func(name, method, path, body string, signKey []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, c.RestURL()+"/slurm/"+dv+"/"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-SLURM-USER-NAME", "root")
		req.Header.Set("X-SLURM-USER-TOKEN", rest.MintToken(signKey, "root", time.Now(), time.Minute))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		fmt.Fprintf(&status, "%s %d %s %s\n", name, resp.StatusCode, method, req.URL.RequestURI())
	}
	do("rest-ping.json", "GET", "ping"+slash, "", key)
	do("rest-jobs.json", "GET", "jobs"+slash, "", key)
	do("rest-job.json", "GET", "job/6", "", key)
	do("rest-job-unknown.json", "GET", "job/999999", "", key)
	do("rest-nodes.json", "GET", "nodes"+slash, "", key)
	do("rest-node.json", "GET", "node/big-1", "", key)
	do("rest-node-unknown.json", "GET", "node/nope-1", "", key)
	do("rest-signal-unknown.json", "DELETE", "job/999999?signal=USR1", "", key)
	do("rest-bad-token.json", "GET", "job/6", "", []byte("not-the-cluster-key-0123456789ab"))
	if v.AtLeast(23, 2) {
		do("rest-update-unknown-node.json", "POST", "node/nope-1", `{"comment":"x"}`, key)
		do("rest-update-unknown-field.json", "POST", "node/big-1", `{"comment":"i-0abc","bogus":"x"}`, key)
	}
	if v.AtLeast(24, 5) {
		do("rest-jobs-state.json", "GET", "jobs/state/", "", key)
	}
	return files, []byte(status.String())
}
