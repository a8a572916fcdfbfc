package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/userdata"
	"github.com/burst-hpc/burst/test/harness"
)

// realCluster is a minimal real slurmctld (configless enabled) on loopback
// with two cloud nodes, plus the munged both sides share. Its Slurm is the
// version BURST_SLURM selects; every Slurm process runs in env (for a
// Debian root, the root's private mount namespace; see harness.Env).
type realCluster struct {
	dir, conf, sock string
	ctldPort        int
	ctld, munged    *exec.Cmd
	env             *harness.Env
	sl              harness.Slurm
}

func needSlurm(t *testing.T) harness.Slurm {
	needRoot(t)
	sl, err := harness.SelectedSlurm()
	if err == nil {
		for _, p := range []string{"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/scontrol"} {
			if _, serr := os.Stat(sl.Path(p)); serr != nil {
				err = fmt.Errorf("%s missing from %s (apt-get install slurmctld slurmd slurm-client munge)", p, sl)
			}
		}
	}
	if err != nil {
		// a version asked for by name never skips
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" || os.Getenv("BURST_SLURM") != "" {
			t.Fatal(err)
		}
		t.Skipf("SKIPPING: %v", err)
	}
	t.Logf("%s", sl)
	return sl
}

func startRealCluster(t *testing.T) *realCluster {
	sl := needSlurm(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	c := &realCluster{sl: sl, dir: dir, conf: filepath.Join(dir, "etc", "slurm.conf"), sock: filepath.Join(dir, "munge", "munge.socket.2"), ctldPort: harness.LocalPort(t)}
	// t.TempDir and this test binary (runIsolated) are under os.TempDir,
	// which every environment binds
	env, err := sl.Enter(context.Background(), harness.EnvOptions{Environ: append(os.Environ(), "SLURM_CONF="+c.conf)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("closing the Slurm environment: %v", err)
		}
	})
	c.env = env
	for _, d := range []string{"etc", "munge", "key", "state", "spool", "log", "run"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Chmod(filepath.Join(dir, "key"), 0o700)
	key := make([]byte, 128)
	rand.Read(key)
	os.WriteFile(filepath.Join(dir, "key", "munge.key"), key, 0o400)
	host, _ := os.Hostname()
	host = strings.Split(host, ".")[0]
	conf := fmt.Sprintf(`ClusterName=bt%d
SlurmctldHost=%s(127.0.0.1)
SlurmctldPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%s
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool/%%n
SlurmctldPidFile=%s/run/slurmctld.pid
SlurmdPidFile=%s/run/slurmd-%%n.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PrivateData=cloud
MailProg=/bin/true
ReturnToService=2
ResumeProgram=%s/resume.sh
SuspendProgram=%s/suspend.sh
ResumeTimeout=60
SuspendTimeout=10
SuspendTime=300
SlurmctldParameters=enable_configless,%s
NodeName=gpu-7 NodeAddr=127.0.0.1 Port=%d CPUs=1 RealMemory=100 State=CLOUD
NodeName=gpu-8 NodeAddr=127.0.0.1 Port=%d CPUs=1 RealMemory=100 State=CLOUD
PartitionName=cloud Nodes=gpu-[7-8] Default=YES MaxTime=INFINITE State=UP
`, c.ctldPort%100000, host, c.ctldPort, c.sock, dir, dir, dir, dir, dir, dir, dir, dir, strings.Join(sl.CloudCtldParameters(), ","), harness.LocalPort(t), harness.LocalPort(t))
	// Slurm runs SuspendProgram without PATH: builtins and absolute paths only.
	os.WriteFile(filepath.Join(dir, "suspend.sh"), []byte("#!/bin/sh\necho \"$1\" >> "+dir+"/suspended\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "resume.sh"), []byte("#!/bin/sh\necho \"$1\" >> "+dir+"/resumed\n"), 0o755)
	os.WriteFile(c.conf, []byte(conf), 0o644)

	c.munged = c.env.Command(context.Background(), "", dir, "/usr/sbin/munged", "--foreground", "--key-file="+filepath.Join(dir, "key", "munge.key"),
		"--socket="+c.sock, "--pid-file="+filepath.Join(dir, "run", "munged.pid"), "--seed-file="+filepath.Join(dir, "key", "seed"),
		"--log-file="+filepath.Join(dir, "log", "munged.log"))
	c.munged.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.munged.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCmd(c.munged) })
	if err := waitFor(context.Background(), 10*time.Second, func() bool { return socketLive(c.sock) }); err != nil {
		t.Fatalf("munged did not start: %s", tailFile(filepath.Join(dir, "log", "munged.log"), 3))
	}
	c.ctld = c.env.Command(context.Background(), "", dir, "/usr/sbin/slurmctld", "-D", "-c", "-f", c.conf)
	c.ctld.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.ctld.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCmd(c.ctld) })
	if err := waitFor(context.Background(), 20*time.Second, func() bool { _, err := c.scontrol("ping"); return err == nil }); err != nil {
		t.Fatalf("slurmctld did not answer: %s", tailFile(filepath.Join(dir, "log", "slurmctld.log"), 5))
	}
	return c
}

func stopCmd(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (c *realCluster) scontrol(args ...string) (string, error) {
	cmd := c.env.Command(context.Background(), "", c.dir, append([]string{"/usr/bin/scontrol"}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// powerUp asks slurmctld to power node up and waits until it has run the
// ResumeProgram for it, which is when a cloud instance would start booting.
// (Slurm 24.11 takes a POWER_DOWN_FORCE that arrives before that for a
// cancelled power-up and leaves the node POWERING_UP until ResumeTimeout.)
func (c *realCluster) powerUp(t *testing.T, node string) {
	t.Helper()
	if out, err := c.scontrol("update", "NodeName="+node, "State=POWER_UP"); err != nil {
		t.Fatalf("power up: %v %s", err, out)
	}
	if err := waitFor(context.Background(), 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(c.dir, "resumed"))
		return strings.Contains(string(data), node)
	}); err != nil {
		t.Fatalf("slurmctld did not run the ResumeProgram for %s within 30 s", node)
	}
}

func (c *realCluster) nodeField(t *testing.T, node, field string) string {
	out, err := c.scontrol("show", "node", "-o", node)
	if err != nil {
		t.Fatalf("scontrol show node %s: %v %s", node, err, out)
	}
	return nodeField(strings.TrimSpace(out), field)
}

// nodeEnv builds one bootstrap "instance" for node against the real cluster.
func (c *realCluster) nodeEnv(t *testing.T, node string) (userdata.UserData, Options, string) {
	dir := filepath.Join(c.dir, "inst-"+node)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	shared := filepath.Join(c.dir, "shared-fsx")
	os.MkdirAll(shared, 0o755)
	agent := filepath.Join(dir, "bin", "burst-agent")
	os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755)
	mp := filepath.Join(dir, "fsx")
	ud := userdata.UserData{
		NodeName: node, Cluster: "bt", IssuedAt: time.Now(),
		Slurm: userdata.Slurm{Controllers: []string{"127.0.0.1"}, Port: c.ctldPort}, // configless
		// default socket: runIsolated bind-mounts the cluster's munge dir on /run/munge
		Munge: userdata.Munge{KeySource: "file://" + filepath.Join(c.dir, "key", "munge.key"), KeyPath: filepath.Join(dir, "munge", "munge.key")},
		FSx: userdata.FSx{DNSName: "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", MountName: "abcdef12",
			MountPoint: mp, CheckpointRoot: filepath.Join(mp, "checkpoints")},
		Test: &userdata.Test{LocalFSDir: shared},
	}
	fakes := newIdentityFakes(t, fakeInstanceID(node), node)
	ud.Agent.SizerURL, ud.Agent.SizerCA = fakes.Sizer, string(fakes.CA)
	nft, _ := scratchNft(t)
	runDir := filepath.Join(dir, "run")
	o := Options{Exec: ExecDirect, RunDir: runDir, StartCheck: 500 * time.Millisecond, Logger: quietLogger(),
		IMDSEndpoint: fakes.IMDS, Commands: Commands{Agent: agent, Nft: nft}}
	t.Cleanup(func() {
		(&rootEnv{runDir: runDir, mountPoint: mp}).teardown(t)
	})
	return ud, o, dir
}

// fakeInstanceID is the instance id nodeEnv's identity document gives node.
func fakeInstanceID(node string) string { return fmt.Sprintf("i-0123456789abcd%03d", len(node)*7%1000) }

// runIsolated runs the bootstrap as a separate process (this test binary's
// TestHelperBootstrap) in a private mount namespace where the cluster's munge
// directory is bind-mounted on /run/munge, as on a real node whose munged
// listens on the default socket (configless slurmd fetches slurm.conf through
// it). The test switch's bind mount stays inside that namespace too.
func (c *realCluster) runIsolated(t *testing.T, o Options) (Report, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("SKIPPING: unshare (util-linux) not installed")
	}
	if _, err := os.Stat("/run/munge"); os.IsNotExist(err) {
		if err := os.Mkdir("/run/munge", 0o755); err == nil {
			t.Cleanup(func() { os.Remove("/run/munge") }) // only if still empty
		}
	}
	cfg, _ := json.Marshal(o)
	// inside a Debian root's namespace /run is a private tmpfs: make the mount point there
	argv := c.env.Argv("", c.dir, unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`mkdir -p /run/munge && mount --bind "$0" /run/munge && exec "$@"`, filepath.Dir(c.sock), os.Args[0], "-test.run=^TestHelperBootstrap$", "-test.count=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "BURST_TEST_BOOTSTRAP="+string(cfg))
	out, runErr := cmd.CombinedOutput()
	var rep Report
	data, err := os.ReadFile(filepath.Join(o.RunDir, "status.json"))
	if err != nil {
		t.Fatalf("bootstrap wrote no status.json (%v): %s", runErr, out)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		return rep, fmt.Errorf("%v: %s", runErr, lastLines(out, 4))
	}
	return rep, nil
}

func (c *realCluster) writeUD(t *testing.T, dir string, ud userdata.UserData, o *Options) {
	doc, err := userdata.Encode(ud)
	if err != nil {
		t.Fatal(err)
	}
	o.UserDataFile = filepath.Join(dir, "user-data")
	os.WriteFile(o.UserDataFile, doc, 0o600)
}

// TestRealSlurmConfiglessJoinAndHandBack runs the bootstrap against a real
// slurmctld: node gpu-7 fetches its configuration (configless) and registers;
// node gpu-8 fails its mount and is handed back through real scontrol with
// the generated client configuration.
func TestRealSlurmConfiglessJoinAndHandBack(t *testing.T) {
	c := startRealCluster(t)
	ctx := context.Background()

	// gpu-7: power up as burst-resume would, then boot it.
	c.powerUp(t, "gpu-7")
	ud, o, dir := c.nodeEnv(t, "gpu-7")
	ud.IssuedAt = time.Now()
	c.writeUD(t, dir, ud, &o)
	t0 := time.Now()
	rep, err := c.runIsolated(t, o)
	if err != nil {
		t.Fatalf("bootstrap: %v\nslurmd log: %s", err, tailFile(filepath.Join(o.RunDir, "slurmd.log"), 5))
	}
	bootDone := time.Since(t0)
	var state string
	err = waitFor(ctx, 30*time.Second, func() bool {
		state = c.nodeField(t, "gpu-7", "State")
		return strings.HasPrefix(state, "IDLE") && !strings.Contains(state, "POWER") && !strings.Contains(state, "NOT_RESPONDING")
	})
	registered := time.Since(t0)
	if err != nil {
		t.Fatalf("gpu-7 did not register: State=%s\nslurmctld: %s\nslurmd: %s", state,
			tailFile(filepath.Join(c.dir, "log", "slurmctld.log"), 5), tailFile(filepath.Join(c.dir, "log", "slurmd-gpu-7.log"), 5)+" | stdout: "+tailFile(filepath.Join(o.RunDir, "slurmd.log"), 8))
	}
	// 23.11+: slurmd registered the instance of the identity document
	// (--instance-id/--instance-type); 22.05 has no such fields
	line, _ := c.scontrol("show", "node", "-o", "gpu-7")
	line = strings.TrimSpace(line)
	v, err := slurm.ParseVersion(c.sl.Release)
	if err != nil {
		t.Fatal(err)
	}
	id, typ := nodeField(line, "InstanceId"), nodeField(line, "InstanceType")
	if v.AtLeast(23, 11) {
		if id != fakeInstanceID("gpu-7") || typ != "g5.xlarge" {
			t.Errorf("Slurm %s: gpu-7 InstanceId=%q InstanceType=%q, want %s g5.xlarge:\n%s", c.sl.Release, id, typ, fakeInstanceID("gpu-7"), line)
		}
		t.Logf("Slurm %s: gpu-7 InstanceId=%s InstanceType=%s", c.sl.Release, id, typ)
	} else if id != "" || typ != "" {
		t.Errorf("Slurm %s: gpu-7 has InstanceId=%q InstanceType=%q", c.sl.Release, id, typ)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "spool", "gpu-7", "conf-cache", "slurm.conf")); err != nil {
		t.Errorf("slurmd did not fetch its configuration from slurmctld (configless): %v", err)
	}
	for _, s := range rep.Steps {
		t.Logf("gpu-7 step %-16s %8.1f ms %s", s.Step, ms(s.Duration), s.Skipped)
	}
	var toRegistered, waited time.Duration
	for _, s := range rep.Steps {
		toRegistered += s.Duration
		waited += s.Waited
		if s.Step == StepRegister {
			break
		}
	}
	t.Logf("gpu-7: bootstrap start -> registered %.0f ms, of which %.0f ms boot-guard wait (%.0f ms of work); whole bootstrap %.0f ms, seen IDLE by the test %.0f ms after start",
		ms(toRegistered), ms(waited), ms(toRegistered-waited), ms(bootDone), ms(registered))

	// gpu-8: the mount fails; the bootstrap hands the node back.
	c.powerUp(t, "gpu-8")
	ud8, o8, dir8 := c.nodeEnv(t, "gpu-8")
	ud8.Test.LocalFSDir = filepath.Join(dir8, "missing")
	o8.BootGuard = -1
	c.writeUD(t, dir8, ud8, &o8)
	rep8, err := c.runIsolated(t, o8)
	if err == nil || !rep8.HandedBack {
		t.Fatalf("want a mount failure handed back, got err %v handed back %v", err, rep8.HandedBack)
	}
	reason := c.nodeField(t, "gpu-8", "Reason")
	state = c.nodeField(t, "gpu-8", "State")
	if !strings.Contains(reason, "burst bootstrap: mount: test switch test.local_fs_dir") {
		t.Fatalf("gpu-8 reason %q does not carry the failure", reason)
	}
	if !strings.Contains(state, "POWER") {
		t.Fatalf("gpu-8 state %q: not powering down", state)
	}
	t0 = time.Now()
	if err := waitFor(ctx, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(c.dir, "suspended"))
		return strings.Contains(string(data), "gpu-8")
	}); err != nil {
		t.Fatalf("slurmctld did not call SuspendProgram for gpu-8 after POWER_DOWN_FORCE (state %s); slurmctld.log:\n%s",
			c.nodeField(t, "gpu-8", "State"), tailFile(filepath.Join(c.dir, "log", "slurmctld.log"), 25))
	}
	t.Logf("gpu-8 handed back: SuspendProgram called %.0f ms after the bootstrap failed; Reason=%s", ms(time.Since(t0)), reason)
	if _, err := os.Stat(filepath.Join(o8.RunDir, "slurm-client.conf")); err != nil {
		t.Errorf("configless hand-back did not use the generated client conf: %v", err)
	}
}
