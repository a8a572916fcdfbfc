package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/userdata"
)

// TestMain doubles as the CleanExec trampoline for TestExecClean.
func TestMain(m *testing.M) {
	if os.Getenv("BURST_TEST_EXEC_CLEAN") == "1" {
		err := ExecClean(os.Args[1:], os.Environ())
		io.WriteString(os.Stderr, err.Error()+"\n")
		os.Exit(3)
	}
	if os.Getenv("BURST_TEST_GO_CHILD") == "1" {
		cmd := exec.Command(os.Args[1], os.Args[2:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			os.Exit(4)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var testCA = func() string {
	b, _ := os.ReadFile(filepath.Join("testdata", "ca.pem"))
	return string(b)
}()

func testUD() userdata.UserData {
	return userdata.UserData{
		NodeName: "gpu-3",
		Cluster:  "lab",
		IssuedAt: time.Now().Add(-time.Minute),
		Slurm:    userdata.Slurm{Controllers: []string{"head", "10.1.2.3"}, Port: 16817},
		// Not the host's key paths: a test that runs this far must not touch them.
		Munge: userdata.Munge{KeySource: "file:///nonexistent/burst-test/cluster.key", Socket: "/run/munge/munge.socket.2",
			KeyPath: "/nonexistent/burst-test/munge.key"},
		FSx:   userdata.FSx{DNSName: "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", MountName: "abcdef12", MountPoint: "/fsx", CheckpointRoot: "/fsx/ckpt"},
		Agent: userdata.Agent{SizerURL: "https://10.1.2.3:8472", SizerCA: testCA, ReportInterval: userdata.Duration(15 * time.Second)},
	}
}

func TestParseMountPoints(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
		err  bool
	}{
		{"typical", "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
			"95 22 0:40 / /fsx rw,relatime shared:50 - lustre 172.31.1.1@tcp:/abcdef12 rw,flock\n", []string{"/", "/fsx"}, false},
		{"escaped space", `30 22 0:5 / /mnt/a\040b rw - tmpfs tmpfs rw` + "\n", []string{"/mnt/a b"}, false},
		{"bind", "40 22 8:1 /srv/x /tmp/m rw,relatime - ext4 /dev/sda1 rw\n", []string{"/tmp/m"}, false},
		{"empty", "", nil, false},
		{"short line", "1 2 3\n", nil, true},
		{"bad escape", `30 22 0:5 / /mnt/a\04 rw - tmpfs tmpfs rw` + "\n", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMountPoints(strings.NewReader(c.in))
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if !c.err && !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestParseSigMasks(t *testing.T) {
	st := "Name:\tslurmd\nSigQ:\t0/1\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000004000\nSigBlk:\t0000000000887a27\nSigIgn:\t0000000000001000\n"
	b, i, err := ParseSigMasks(st)
	if err != nil || b != 0x887a27 || i != 0x1000 {
		t.Fatalf("got %x %x %v", b, i, err)
	}
	if b&(1<<14) == 0 { // SIGTERM = 15
		t.Fatal("SIGTERM bit not set in the lab's observed slurmd mask")
	}
	for _, bad := range []string{"", "SigBlk:\tzz\nSigIgn:\t0\n", "SigBlk:\t0\n"} {
		if _, _, err := ParseSigMasks(bad); err == nil {
			t.Errorf("ParseSigMasks(%q) accepted", bad)
		}
	}
}

func TestEnvLine(t *testing.T) {
	cases := []struct{ k, v, want string }{
		{"SLURMD_OPTIONS", "-b -N gpu-1 --conf-server head:6817", `SLURMD_OPTIONS="-b -N gpu-1 --conf-server head:6817"` + "\n"},
		{"X", `a"b\c`, `X="a\"b\\c"` + "\n"},
		{"X", "", `X=""` + "\n"},
	}
	for _, c := range cases {
		got, err := envLine(c.k, c.v)
		if err != nil || got != c.want {
			t.Errorf("envLine(%q,%q) = %q, %v; want %q", c.k, c.v, got, err, c.want)
		}
	}
	for _, bad := range [][2]string{{"X", "a\nY=b"}, {"A=B", "x"}, {"", "x"}, {"X", "a\x00"}} {
		if _, err := envLine(bad[0], bad[1]); err == nil {
			t.Errorf("envLine(%q) accepted", bad)
		}
	}
}

func TestFailureReason(t *testing.T) {
	r := FailureReason("mount", errors.New("mount.lustre: \"x\"\nfailed\x01 é"))
	if r != `burst bootstrap: mount: mount.lustre: ?x? failed? ?` {
		t.Fatalf("got %q", r)
	}
	long := FailureReason("slurmd", errors.New(strings.Repeat("x", 500)))
	if len(long) != maxReason || !strings.HasSuffix(long, "...") {
		t.Fatalf("long reason: %d %q", len(long), long[len(long)-5:])
	}
}

func TestCommandLines(t *testing.T) {
	u := testUD()
	if got, want := SlurmdArgs(u), []string{"-b", "-N", "gpu-3", "--conf-server", "head:16817,10.1.2.3:16817"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SlurmdArgs configless = %q, want %q", got, want)
	}
	u.Slurm.ConfMode, u.Slurm.ConfPath = userdata.ConfFile, "/shared/slurm.conf"
	if got, want := SlurmdArgs(u), []string{"-b", "-N", "gpu-3", "-f", "/shared/slurm.conf"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SlurmdArgs file = %q, want %q", got, want)
	}
	if got, want := LustreMountArgs(u.FSx), []string{"-t", "lustre", "-o", "relatime,flock",
		"fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdef12", "/fsx"}; !reflect.DeepEqual(got, want) {
		t.Errorf("LustreMountArgs = %q, want %q", got, want)
	}
	if got, want := HandBackArgs("gpu-3", "burst bootstrap: mount: x"), []string{"update", "NodeName=gpu-3",
		"State=POWER_DOWN_FORCE", "Reason=burst bootstrap: mount: x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HandBackArgs = %q, want %q", got, want)
	}
	env := AgentEnv(u, "/run/burst/agent.credential", "/run/burst/sizer-ca.pem", "/var/lib/burst-agent/identity.nonce")
	want := []string{"BURST_NODE_NAME=gpu-3", "BURST_SIZER_URL=https://10.1.2.3:8472",
		"BURST_CREDENTIAL_FILE=/run/burst/agent.credential", "BURST_SIZER_CA_FILE=/run/burst/sizer-ca.pem", "BURST_NONCE_FILE=/var/lib/burst-agent/identity.nonce",
		"BURST_REPORT_INTERVAL=15s", "BURST_CHECKPOINT_ROOT=/fsx/ckpt"}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("AgentEnv = %q, want %q", env, want)
	}
	u.Agent.IMDSEndpoint = "http://127.0.0.1:1338"
	if env := AgentEnv(u, "/c", "/a", "/n"); env[len(env)-1] != "BURST_IMDS_ENDPOINT=http://127.0.0.1:1338" {
		t.Errorf("IMDS override missing: %q", env)
	}
	u.Agent.LogLevel = "debug"
	if env := AgentEnv(u, "/c", "/a", "/n"); env[len(env)-1] != "BURST_LOG_LEVEL=debug" {
		t.Errorf("burst.yaml's log.level does not reach the agent: %q", env)
	}
	conf := ClientConf(testUD())
	for _, w := range []string{"ClusterName=lab\n", "SlurmctldHost=head\n", "SlurmctldHost=10.1.2.3\n", "SlurmctldPort=16817\n",
		"AuthType=auth/munge\n", "AuthInfo=socket=/run/munge/munge.socket.2\n"} {
		if !strings.Contains(conf, w) {
			t.Errorf("ClientConf lacks %q:\n%s", w, conf)
		}
	}
}

func TestNodeRegistered(t *testing.T) {
	cases := []struct {
		state        string
		done, failed bool
	}{
		{"IDLE+CLOUD", true, false},
		{"ALLOCATED+CLOUD", true, false},
		{"MIXED", true, false},
		{"IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", false, false},
		{"ALLOCATED+CLOUD+POWERING_UP", false, false},
		{"IDLE+CLOUD+POWERED_DOWN", false, false},
		{"IDLE+CLOUD+INVAL", false, true},
		{"DOWN+CLOUD+NOT_RESPONDING", false, true},
		{"IDLE+DRAIN", false, true},
		{"", false, false},
	}
	for _, c := range cases {
		if d, f := NodeRegistered(c.state); d != c.done || f != c.failed {
			t.Errorf("NodeRegistered(%q) = %v,%v; want %v,%v", c.state, d, f, c.done, c.failed)
		}
	}
	line := "NodeName=gpu-8 Arch=x86_64 CoresPerSocket=1 State=IDLE+CLOUD+POWERING_DOWN ThreadsPerCore=1 Reason=burst bootstrap: mount: x y [root@2026-11-29T14:48:22]\n"
	if got := nodeField(line, "State"); got != "IDLE+CLOUD+POWERING_DOWN" {
		t.Errorf("State = %q", got)
	}
	if got := nodeField(line, "Reason"); got != "burst bootstrap: mount: x y" {
		t.Errorf("Reason = %q", got)
	}
	if got := nodeField(line, "Gres"); got != "" {
		t.Errorf("Gres = %q", got)
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{{}, {Exec: "docker"}, {Exec: ExecDirect, RunDir: "run"}} {
		if _, err := RunReport(context.Background(), o); err == nil {
			t.Errorf("RunReport(%+v) accepted", o)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A failure before munge is up cannot be reported to slurmctld: Run must say
// so, fail with the step, and still write status.json.
func TestRunBadUserDataNoHandBack(t *testing.T) {
	dir := t.TempDir()
	udf := filepath.Join(dir, "ud")
	os.WriteFile(udf, []byte("#burst-userdata v9\n{}"), 0o600)
	rep, err := RunReport(context.Background(), Options{Exec: ExecDirect, UserDataFile: udf, RunDir: filepath.Join(dir, "run"), Logger: quietLogger()})
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepUserData {
		t.Fatalf("want StepError at userdata, got %v", err)
	}
	var uv *userdata.UnsupportedVersionError
	if !errors.As(err, &uv) {
		t.Fatalf("version error not wrapped: %v", err)
	}
	if rep.HandedBack || rep.OK || len(rep.Steps) != 1 {
		t.Fatalf("report %+v", rep)
	}
	data, err := os.ReadFile(filepath.Join(dir, "run", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st Report
	if err := json.Unmarshal(data, &st); err != nil || st.OK || st.Steps[0].Err == "" {
		t.Fatalf("status.json: %v %s", err, data)
	}
}

// TestExecClean shows the problem and the fix. slurmctld's ResumeProgram
// children start with SigBlk 0x887a27 (HUP INT QUIT ABRT USR1 USR2 PIPE ALRM
// TERM TSTP XCPU blocked). Go unblocks the signals its runtime needs
// (SIGTERM among them) in its own threads, so os/exec children get SIGTERM
// back, but blockable ones such as SIGUSR1 stay blocked: a slurmd started that
// way passes a blocked SIGUSR1 to every job, and `--signal=B:USR1@60`
// checkpoint signals never arrive. ExecClean clears the mask.
func TestExecClean(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("perl not installed; cannot start a process with SIGTERM blocked")
	}
	block := `use POSIX; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGTERM, SIGUSR1)) or die; $SIG{HUP}='IGNORE'; exec {$ARGV[0]} @ARGV or die`
	masks := func(mode string) (uint64, uint64) {
		args := []string{"-e", block, "--"}
		env := os.Environ()
		switch mode {
		case "clean":
			args = append(args, os.Args[0], "/bin/cat", "/proc/self/status")
			env = append(env, "BURST_TEST_EXEC_CLEAN=1")
		case "go-child":
			args = append(args, os.Args[0], "/bin/cat", "/proc/self/status")
			env = append(env, "BURST_TEST_GO_CHILD=1")
		default:
			args = append(args, "/bin/cat", "/proc/self/status")
		}
		cmd := exec.Command(perl, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		b, i, err := ParseSigMasks(string(out))
		if err != nil {
			t.Fatal(err)
		}
		return b, i
	}
	const term, usr1, hup = 1 << 14, 1 << 9, 1 << 0
	if b, i := masks("direct"); b&term == 0 || b&usr1 == 0 || i&hup == 0 {
		t.Fatalf("control: perl did not block SIGTERM+SIGUSR1 / ignore SIGHUP (blk %x ign %x)", b, i)
	}
	b, i := masks("go-child")
	t.Logf("os/exec child of a Go process started with TERM+USR1 blocked, HUP ignored: SigBlk %x SigIgn %x", b, i)
	if b&usr1 == 0 {
		t.Logf("note: this Go runtime no longer passes a blocked SIGUSR1 to children")
	}
	if b, i := masks("clean"); b != 0 || i&hup != 0 {
		t.Fatalf("after ExecClean: SigBlk %x SigIgn %x, want no blocked signals and SIGHUP not ignored", b, i)
	}
}

func FuzzParseMountPoints(f *testing.F) {
	f.Add("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
	f.Add(`30 22 0:5 / /mnt/a\040b rw - tmpfs tmpfs rw` + "\n")
	f.Add(`30 22 0:5 / /mnt/a\04 rw - tmpfs tmpfs rw`)
	f.Fuzz(func(t *testing.T, in string) {
		mps, err := ParseMountPoints(strings.NewReader(in))
		if err != nil {
			return
		}
		lines := 0
		for _, l := range strings.Split(in, "\n") {
			if l != "" {
				lines++
			}
		}
		if len(mps) > lines {
			t.Fatalf("%d mount points from %d lines", len(mps), lines)
		}
	})
}

func FuzzParseSigMasks(f *testing.F) {
	f.Add("SigBlk:\t0000000000887a27\nSigIgn:\t0000000000001000\n")
	f.Add("SigBlk:\tzz\n")
	f.Fuzz(func(t *testing.T, in string) {
		b, i, err := ParseSigMasks(in)
		if err != nil && (b != 0 || i != 0) {
			t.Fatalf("error with non-zero masks %x %x", b, i)
		}
	})
}

func TestInstanceArgs(t *testing.T) {
	in := Instance{ID: "i-0123456789abcdef0", Type: "g5.xlarge"}
	for _, c := range []struct {
		v    string
		in   Instance
		want []string
	}{
		{"22.05.8", in, nil},
		{"23.02.7", in, nil},
		{"23.11.4", in, []string{"--instance-id", "i-0123456789abcdef0", "--instance-type", "g5.xlarge"}},
		{"26.05.5", in, []string{"--instance-id", "i-0123456789abcdef0", "--instance-type", "g5.xlarge"}},
		{"24.11.5", Instance{}, nil}, // unknown instance: nothing
	} {
		v, err := slurm.ParseVersion(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := InstanceArgs(v, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("InstanceArgs(%s, %+v) = %q, want %q", c.v, c.in, got, c.want)
		}
	}
}

func TestParseInstanceDoc(t *testing.T) {
	good := `{"accountId":"123456789012","availabilityZone":"us-east-1a","instanceId":"i-0123456789abcdef0","instanceType":"p4d.24xlarge","region":"us-east-1"}`
	in, err := ParseInstanceDoc([]byte(good))
	if err != nil || in != (Instance{ID: "i-0123456789abcdef0", Type: "p4d.24xlarge"}) {
		t.Fatalf("ParseInstanceDoc = %+v, %v", in, err)
	}
	for name, doc := range map[string]string{
		"not JSON":        `instanceId=i-1`,
		"no id":           `{"instanceType":"g5.xlarge"}`,
		"id not i-hex":    `{"instanceId":"i-XYZ","instanceType":"g5.xlarge"}`,
		"id with option":  `{"instanceId":"--conf=x","instanceType":"g5.xlarge"}`,
		"type with space": `{"instanceId":"i-0123456789abcdef0","instanceType":"g5 xlarge"}`,
		"no type":         `{"instanceId":"i-0123456789abcdef0"}`,
	} {
		if in, err := ParseInstanceDoc([]byte(doc)); err == nil {
			t.Errorf("%s: ParseInstanceDoc(%s) = %+v, want an error", name, doc, in)
		}
	}
}
