package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/userdata"
)

func TestRootDirectBootstrap(t *testing.T) {
	e := newRootEnv(t)
	e.writeUD(t)
	e.fakes.Untagged.Store(3) // the fleet's CreateTags lands a moment after boot
	e.fakes.NotYet.Store(2)   // and EC2 shows it to the sizer a moment later
	rep, err := RunReport(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("bootstrap failed: %v\nseq:\n%s", err, e.read(t, "seq.log"))
	}
	// slurmd and burst-agent each start once munge, the mount and the
	// checkpoint root are up (their order between them is not fixed: the
	// agent starts while slurmd registers)
	seq := e.read(t, "seq.log")
	slurmd := fmt.Sprintf("slurmd [-D] [-b] [-N] [gpu-7] [-f] [%s]\nslurmd: munge-up\nslurmd: fsx-mounted\nslurmd: ckpt-root\n", e.ud.Slurm.ConfPath)
	agent := "burst-agent [run]\nburst-agent: munge-up\nburst-agent: fsx-mounted\nburst-agent: ckpt-root\n"
	if seq != slurmd+agent && seq != agent+slurmd {
		t.Fatalf("sequence:\n%s\nwant, in either order:\n%s%s", seq, slurmd, agent)
	}
	// The daemons run with a clean signal state.
	for _, d := range []string{"slurmd", "burst-agent"} {
		b, i, err := ParseSigMasks(e.read(t, d+".sig"))
		if err != nil || b != 0 || i&(1<<9|1<<14) != 0 {
			t.Errorf("%s signal state: blk %x ign %x %v", d, b, i, err)
		}
	}
	// slurmd did not start within the boot guard of issued_at.
	started, _ := strconv.ParseFloat(strings.TrimSpace(e.read(t, "slurmd.started")), 64)
	if guard := float64(e.ud.IssuedAt.Add(time.Second).UnixNano()) / 1e9; started < guard {
		t.Errorf("slurmd started at %.3f, before issued_at+1s = %.3f", started, guard)
	}
	// Agent environment and credential file.
	env := e.read(t, "burst-agent.env")
	cred := filepath.Join(e.runDir, "agent.credential")
	for _, w := range []string{"BURST_NODE_NAME=gpu-7\n", "BURST_CREDENTIAL_FILE=" + cred + "\n", "BURST_IMDS_ENDPOINT=" + e.fakes.IMDS + "\n",
		"BURST_SIZER_CA_FILE=" + filepath.Join(e.runDir, "sizer-ca.pem") + "\n", "BURST_NONCE_FILE=" + e.opts.NonceFile + "\n",
		"BURST_CHECKPOINT_ROOT=" + e.ud.FSx.CheckpointRoot + "\n", "BURST_REPORT_INTERVAL=15s\n"} {
		if !strings.Contains(env, w) {
			t.Errorf("agent env lacks %q:\n%s", w, env)
		}
	}
	if st, err := os.Stat(cred); err != nil || st.Mode().Perm() != 0o400 {
		t.Errorf("credential file: %v %v", st.Mode(), err)
	}
	// the node learnt its name and credential from the exchange (after two
	// "not yet" answers), with one nonce kept root-only
	if tok, err := auth.LoadCredential(cred); err != nil || !strings.HasPrefix(tok, "bn2:i-0123456789abcdef7:gpu-7:") {
		t.Errorf("credential %q %v", tok, err)
	}
	if n := e.fakes.Exchanges.Load(); n != 3 {
		t.Errorf("%d exchanges, want 3 (two retried)", n)
	}
	if st, err := os.Stat(e.opts.NonceFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("nonce file: %v", err)
	}
	// the IMDS firewall is in the node's namespace: metadata for root only
	out, err := exec.Command("ip", "netns", "exec", e.netns, "nft", "list", "table", "inet", FirewallTable).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ip daddr 169.254.169.254 meta skuid != 0") || !strings.Contains(string(out), "ip6 daddr fd00:ec2::254 meta skuid != 0") ||
		!strings.Contains(string(out), "ip daddr 127.0.0.1 tcp dport "+e.fakes.IMDS[strings.LastIndexByte(e.fakes.IMDS, ':')+1:]+" meta skuid != 0") {
		t.Errorf("firewall: %v\n%s", err, out)
	}
	// Munge: key installed 0400, munged answers, a credential round-trips.
	if st, err := os.Stat(e.ud.Munge.KeyPath); err != nil || st.Mode().Perm() != 0o400 {
		t.Errorf("munge key: %v", err)
	}
	if out, err := exec.Command("sh", "-c", "munge -n -S \"$1\" | unmunge -S \"$1\"", "sh", e.ud.Munge.Socket).CombinedOutput(); err != nil ||
		!bytes.Contains(out, []byte("STATUS:          Success")) {
		t.Errorf("munge round trip through the bootstrap's munged: %v %s", err, out)
	}
	// The test switch: the shared local directory is bind-mounted, writes are shared.
	os.WriteFile(filepath.Join(e.ud.FSx.CheckpointRoot, "x"), []byte("1"), 0o644)
	if _, err := os.Stat(filepath.Join(e.localFS, "checkpoints", "x")); err != nil {
		t.Errorf("write under the mount point not visible in test.local_fs_dir: %v", err)
	}
	if st, _ := os.Stat(e.ud.FSx.CheckpointRoot); st.Mode()&os.ModeSticky != 0 || st.Mode().Perm() != 0o755 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("checkpoint root mode %v, want root's drwxr-xr-x (the Prolog makes job directories)", st.Mode())
	}
	// Report and status.json.
	if !rep.OK || len(rep.Steps) != 10 || rep.HandedBack {
		t.Fatalf("report %+v", rep)
	}
	var st Report
	data, _ := os.ReadFile(filepath.Join(e.runDir, "status.json"))
	if err := json.Unmarshal(data, &st); err != nil || !st.OK || st.NodeName != "gpu-7" {
		t.Fatalf("status.json %s: %v", data, err)
	}
	for _, s := range rep.Steps {
		t.Logf("step %-16s %8.1f ms %s", s.Step, ms(s.Duration), s.Skipped)
	}
	t.Logf("total %.1f ms (includes the %s boot guard)", ms(rep.Total), e.opts.BootGuard)

	// A second run on the same "instance" (e.g. a unit restart) finds munged
	// and the mount in place and does not stack another mount.
	e.opts.BootGuard = -1
	os.Remove(e.seq)
	exec.Command("sh", "-c", "kill $(cat \"$1\"/slurmd.pid \"$1\"/agent.pid)", "sh", e.runDir).Run()
	rep2, err := RunReport(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if rep2.Steps[3].Skipped == "" || rep2.Steps[4].Skipped == "" {
		t.Errorf("second run did not skip munge/mount: %+v", rep2.Steps)
	}
}

// TestRootBootsWithTheSizerDown: a sizer that does not answer does not
// stop the boot: the node joins Slurm without a credential (burst-agent
// exchanges later); its name comes from its own tag.
func TestRootBootsWithTheSizerDown(t *testing.T) {
	e := newRootEnv(t)
	e.writeUD(t)
	e.fakes.Down.Store(true)
	e.opts.SizerWait = 500 * time.Millisecond
	rep, err := RunReport(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("bootstrap with the sizer down: %v", err)
	}
	if !rep.OK || rep.Steps[2].Step != StepIdentity || !strings.Contains(rep.Steps[2].Skipped, "sizer unreachable") {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(e.runDir, "agent.credential")); !os.IsNotExist(err) {
		t.Errorf("a credential without an exchange: %v", err)
	}
	if !strings.Contains(e.read(t, "seq.log"), "slurmd [-D] [-b] [-N] [gpu-7]") {
		t.Errorf("slurmd not started as gpu-7:\n%s", e.read(t, "seq.log"))
	}
}

func TestRootSlurmdFailureHandsBack(t *testing.T) {
	e := newRootEnv(t)
	e.ud.IssuedAt = time.Now().Add(-time.Minute)
	e.writeUD(t)
	os.WriteFile(filepath.Join(e.dir, "FAIL_slurmd"), nil, 0o644)
	e.opts.RegisterTimeout = -1 // the StartCheck path (TestRootSlurmdDiesBeforeRegistering covers the other)
	rep, err := RunReport(context.Background(), e.opts)
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepSlurmd {
		t.Fatalf("want StepError at slurmd, got %v", err)
	}
	if !strings.Contains(err.Error(), "Unable to establish controller connection") {
		t.Errorf("error does not carry slurmd's last log line: %v", err)
	}
	if !rep.HandedBack {
		t.Fatalf("node not handed back: %+v", rep)
	}
	args := strings.Split(strings.TrimSpace(e.read(t, "scontrol.args")), "\n")
	if len(args) != 4 || args[0] != "update" || args[1] != "NodeName=gpu-7" || args[2] != "State=POWER_DOWN_FORCE" ||
		!strings.HasPrefix(args[3], "Reason=burst bootstrap: slurmd: slurmd exited") {
		t.Fatalf("scontrol args %q", args)
	}
	if conf := e.read(t, "scontrol.conf"); conf != "ClusterName=lab\n" {
		t.Fatalf("scontrol did not get the slurm.conf from user data:\n%s", conf)
	}
	if strings.Contains(e.read(t, "seq.log"), "burst-agent") {
		t.Fatal("agent started after slurmd failed")
	}
}

// slurmd survives StartCheck but dies before slurmctld sees it: the
// registration wait catches it and hands the node back.
func TestRootSlurmdDiesBeforeRegistering(t *testing.T) {
	e := newRootEnv(t)
	e.ud.IssuedAt = time.Now().Add(-time.Minute)
	e.writeUD(t)
	e.opts.StartCheck = 100 * time.Millisecond
	os.WriteFile(filepath.Join(e.dir, "STATE"), []byte("IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"), 0o644)
	// fake slurmd that lives 1 s, then fails like a slurmd that cannot authenticate
	e.opts.Commands.Slurmd = e.script(t, "slurmd", "#!/bin/sh\n[ \"$1\" = -V ] && { echo 'slurm-wlm 22.05.8'; exit 0; }\nsleep 1\necho 'slurmd: error: Munge encode failed' >&2\nexit 1\n")
	rep, err := RunReport(context.Background(), e.opts)
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepRegister || !strings.Contains(err.Error(), "Munge encode failed") {
		t.Fatalf("want StepError at register carrying slurmd's log, got %v", err)
	}
	if !rep.HandedBack || !strings.Contains(e.read(t, "scontrol.args"), "Reason=burst bootstrap: register: slurmd exited before registering") {
		t.Fatalf("not handed back: %+v %q", rep, e.read(t, "scontrol.args"))
	}
}

// A node slurmctld marks INVAL (e.g. fewer GPUs than configured) fails at once.
func TestRootNodeInvalHandsBack(t *testing.T) {
	e := newRootEnv(t)
	e.ud.IssuedAt = time.Now().Add(-time.Minute)
	e.writeUD(t)
	os.WriteFile(filepath.Join(e.dir, "STATE"), []byte("IDLE+CLOUD+INVAL"), 0o644)
	_, err := RunReport(context.Background(), e.opts)
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepRegister || !strings.Contains(err.Error(), "IDLE+CLOUD+INVAL") {
		t.Fatalf("want StepError at register naming the state, got %v", err)
	}
}

func TestRootMountFailureHandsBack(t *testing.T) {
	e := newRootEnv(t)
	e.ud.Test.LocalFSDir = filepath.Join(e.dir, "does-not-exist")
	e.writeUD(t)
	rep, err := RunReport(context.Background(), e.opts)
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepMount || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want StepError at mount wrapping ErrNotExist, got %v", err)
	}
	if !rep.HandedBack || rep.Steps[len(rep.Steps)-1].Step != StepMount {
		t.Fatalf("report %+v", rep)
	}
	args := e.read(t, "scontrol.args")
	if !strings.Contains(args, "Reason=burst bootstrap: mount: test switch test.local_fs_dir:") {
		t.Fatalf("scontrol args %q", args)
	}
	// file mode: scontrol uses the cluster's slurm.conf, not a generated one.
	if e.read(t, "scontrol.conf") != "ClusterName=lab\n" {
		t.Fatalf("scontrol did not get the slurm.conf from user data")
	}
	if _, err := os.Stat(filepath.Join(e.dir, "slurmd.started")); err == nil {
		t.Fatal("slurmd started after the mount failed")
	}
}

// A bootstrap started with blocked signals (as from slurmctld) must refuse to
// start daemons without CleanExec, and start them clean with it.
func TestRootInheritedSignalMask(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("SKIPPING: perl not installed")
	}
	e := newRootEnv(t)
	e.ud.IssuedAt = time.Now().Add(-time.Minute)
	e.writeUD(t)
	// Run this test binary as the bootstrap under a blocked SIGUSR1.
	run := func(clean bool) ([]byte, error) {
		cfg, _ := json.Marshal(e.opts)
		cmd := exec.Command(perl, "-e", `use POSIX; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1, SIGTERM)) or die; exec {$ARGV[0]} @ARGV or die`,
			"--", os.Args[0], "-test.run=^TestHelperBootstrap$")
		cmd.Env = append(os.Environ(), "BURST_TEST_BOOTSTRAP="+string(cfg))
		if clean {
			cmd.Env = append(cmd.Env, "BURST_TEST_CLEANEXEC="+os.Args[0])
		}
		return cmd.CombinedOutput()
	}
	out, err := run(false)
	if err == nil || !bytes.Contains(out, []byte("SIGUSR1 blocked")) || !bytes.Contains(out, []byte("CleanExec")) {
		t.Fatalf("bootstrap with blocked signals and no CleanExec: err %v\n%s", err, out)
	}
	e.teardown(t) // munged from the first run
	out, err = run(true)
	if err != nil {
		t.Fatalf("bootstrap with CleanExec: %v\n%s", err, out)
	}
	for _, d := range []string{"slurmd", "burst-agent"} {
		b, _, err := ParseSigMasks(e.read(t, d+".sig"))
		if err != nil || b != 0 {
			t.Errorf("%s started through CleanExec has SigBlk %x (%v)", d, b, err)
		}
	}
}

// TestHelperBootstrap runs the bootstrap in a child process for
// TestRootInheritedSignalMask; it does nothing in a normal test run.
func TestHelperBootstrap(t *testing.T) {
	cfg := os.Getenv("BURST_TEST_BOOTSTRAP")
	if cfg == "" {
		t.Skip("helper process only")
	}
	var o Options
	if err := json.Unmarshal([]byte(cfg), &o); err != nil {
		t.Fatal(err)
	}
	o.Logger = quietLogger()
	if c := os.Getenv("BURST_TEST_CLEANEXEC"); c != "" {
		o.CleanExec = []string{"/usr/bin/env", "BURST_TEST_EXEC_CLEAN=1", c}
	}
	if _, err := RunReport(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// TestRootSystemdMode runs the production path (Exec systemd, a real Lustre
// mount command line) with a fake systemctl and a fake mount that checks the
// AWS options and bind-mounts a local directory in Lustre's place.
func TestRootSystemdMode(t *testing.T) {
	e := newRootEnv(t)
	e.ud.IssuedAt = time.Now().Add(-time.Minute)
	e.ud.Test = nil
	e.writeUD(t)
	// munge.service stand-in: a munged already on the socket, with the same key.
	keySrc, _ := e.ud.Munge.KeyFile()
	os.MkdirAll(filepath.Dir(e.ud.Munge.Socket), 0o755)
	munged := exec.Command("/usr/sbin/munged", "--foreground", "--key-file="+keySrc, "--socket="+e.ud.Munge.Socket,
		"--pid-file="+filepath.Join(e.dir, "m.pid"), "--seed-file="+filepath.Join(e.dir, "keys", "seed"), "--log-file="+filepath.Join(e.dir, "m.log"))
	if err := munged.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCmd(munged) })
	e.opts.Exec = ExecSystemd
	os.WriteFile(filepath.Join(e.dir, "STATE"), []byte("IDLE+CLOUD"), 0o644) // no fake slurmd runs here
	// The production path refuses the test switch.
	e.ud.Test = &userdata.Test{LocalFSDir: e.localFS}
	e.writeUD(t)
	if _, err := RunReport(context.Background(), e.opts); err == nil || !strings.Contains(err.Error(), "test section") {
		t.Fatalf("systemd mode accepted a test section: %v", err)
	}
	e.ud.Test = nil
	e.writeUD(t)
	e.opts.Commands.Systemctl = e.script(t, "systemctl", `#!/bin/sh
echo "systemctl $*" >> @SEQ@
`)
	e.opts.Commands.Mount = e.script(t, "mount", `#!/bin/sh
echo "mount $*" >> @SEQ@
[ "$1 $2 $3 $4" = "-t lustre -o relatime,flock" ] || { echo "mount: unexpected options $*" >&2; exit 32; }
exec /usr/bin/mount --bind @DIR@/shared-fsx "$6"
`)
	rep, err := RunReport(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, e.read(t, "seq.log"))
	}
	want := "systemctl restart munge.service\n" +
		"mount -t lustre -o relatime,flock fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdef12 " + e.mountPoint + "\n" +
		"systemctl start slurmd.service\n" +
		"systemctl is-active --quiet slurmd.service\n" + // at most one liveness probe while registering
		"systemctl start burst-agent.service\n" +
		"systemctl is-active --quiet burst-agent.service\n"
	got := e.read(t, "seq.log")
	if got != want && got != strings.Replace(want, "systemctl is-active --quiet slurmd.service\n", "", 1) {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
	slurmdEnv, _ := os.ReadFile(filepath.Join(e.runDir, "slurmd.env"))
	if string(slurmdEnv) != `SLURMD_OPTIONS="-b -N gpu-7 -f `+e.ud.Slurm.ConfPath+`"`+"\n" {
		t.Errorf("slurmd.env = %q", slurmdEnv)
	}
	agentEnv, _ := os.ReadFile(filepath.Join(e.runDir, "agent.env"))
	for _, w := range []string{`BURST_NODE_NAME="gpu-7"`, `BURST_CREDENTIAL_FILE="` + filepath.Join(e.runDir, "agent.credential") + `"`} {
		if !strings.Contains(string(agentEnv), w+"\n") {
			t.Errorf("agent.env lacks %s:\n%s", w, agentEnv)
		}
	}
	if tok, _ := auth.LoadCredential(filepath.Join(e.runDir, "agent.credential")); tok == "" || strings.Contains(string(agentEnv), tok) {
		t.Error("agent.env carries the credential itself")
	}
	// munged (running as user munge under systemd) must own the key.
	if st, err := os.Stat(e.ud.Munge.KeyPath); err != nil {
		t.Fatal(err)
	} else if u, err := user.Lookup("munge"); err == nil && fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid) != u.Uid {
		t.Errorf("munge key owned by uid %d, want munge (%s)", st.Sys().(*syscall.Stat_t).Uid, u.Uid)
	}
	if st, err := os.Stat(filepath.Dir(e.ud.Munge.KeyPath)); err == nil {
		if u, err := user.Lookup("munge"); err == nil && fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid) != u.Uid {
			t.Errorf("key directory created for munge is owned by uid %d", st.Sys().(*syscall.Stat_t).Uid)
		}
	}
	if !rep.OK {
		t.Fatalf("report %+v", rep)
	}
}

// TestRootSlurmdInstance: a 23.11+ slurmd (its -V says so) is started with
// the instance id and type of the identity document; the 22.05 slurmd of
// TestRootDirectBootstrap gets neither (it would exit on them).
func TestRootSlurmdInstance(t *testing.T) {
	e := newRootEnv(t)
	os.WriteFile(filepath.Join(e.dir, "slurmd.version"), []byte("slurm 24.11.5\n"), 0o644)
	e.writeUD(t)
	if _, err := RunReport(context.Background(), e.opts); err != nil {
		t.Fatalf("bootstrap failed: %v\nseq:\n%s", err, e.read(t, "seq.log"))
	}
	want := fmt.Sprintf("slurmd [-D] [-b] [-N] [gpu-7] [-f] [%s] [--instance-id] [i-0123456789abcdef7] [--instance-type] [g5.xlarge]\n", e.ud.Slurm.ConfPath)
	if seq := e.read(t, "seq.log"); !strings.HasPrefix(seq, want) && !strings.Contains(seq, "\n"+want) {
		t.Fatalf("slurmd started as:\n%s\nwant:\n%s", seq, want)
	}
}
