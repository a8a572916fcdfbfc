package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/auth"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// attackResult is one attempt of test/e2e/attack.
type attackResult struct {
	Attack    string `json:"attack"`
	Succeeded bool   `json:"succeeded"`
	Detail    string `json:"detail"`
}

// home makes a private working directory for a user under the stack.
func home(t *testing.T, s *stack.Stack, u harness.User) string {
	t.Helper()
	d := filepath.Join(s.Dir, "home", u.Name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(d), 0o711)
	if err := os.Chown(d, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	return d
}

// writeAs writes a file owned by u.
func writeAs(t *testing.T, u harness.User, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, u.UID, u.GID)
}

// sbatchAs submits a job as u (not root), from dir.
func sbatchAs(t *testing.T, s *stack.Stack, u harness.User, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := s.Cluster.SbatchAs(ctx, u, append([]string{"--chdir=" + dir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dumpStore is every table of the sizer's database, row by row.
func dumpStore(t *testing.T, s *stack.Stack) map[string][]string {
	t.Helper()
	st, err := store.OpenReadOnly(s.Cfg.Sizer.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := st.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func storeUnchanged(t *testing.T, what string, before, after map[string][]string) {
	t.Helper()
	if reflect.DeepEqual(before, after) {
		return
	}
	for tbl := range after {
		if !reflect.DeepEqual(before[tbl], after[tbl]) {
			t.Errorf("%s changed the sizer's table %s:\n before %q\n after  %q", what, tbl, before[tbl], after[tbl])
		}
	}
}

func userData(t *testing.T, s *stack.Stack, id string) string {
	t.Helper()
	out, err := emuEC2(s).DescribeInstanceAttribute(context.Background(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id), Attribute: types.InstanceAttributeNameUserData})
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(aws.ToString(out.UserData.Value))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSecurity: an unprivileged user's job on a burst node tries every
// attack of issue 13 and each fails: IMDS (role credentials, user data,
// identity document), the secrets of the node (its sizer credential and
// nonce, the munge key), forged sizer reports (an interruption dated 2100,
// low-use samples for another user's job) with no, a forged or the
// world-readable route credential, plain HTTP, and pre-creating or
// symlinking checkpoint directories. Root on the attacker's node (a
// compromised node) fares no better with its real credential; a dead
// instance's credential is refused; entries planted in the checkpoint root
// are moved aside. The sizer's store is compared table by table, row by
// row, before and after.
func TestSecurity(t *testing.T) {
	atk, vic := attackerAndVictim(t)
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		// nothing writes the store during the attack window but the attacks
		c.Agent.ReportInterval = config.D(time.Hour)
		c.Sizer.CredentialTTL = config.D(time.Hour)
	}})
	ctx := context.Background()
	for _, u := range []harness.User{atk, vic} {
		if err := s.Cluster.AddUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	attack := filepath.Join(s.Dir, "bin", "burst-attack")
	if out, err := exec.Command("go", "build", "-o", attack, "./attack").CombinedOutput(); err != nil {
		t.Fatalf("building the attack program: %v\n%s", err, out)
	}
	os.Chmod(attack, 0o755)
	// the checkpoint root as the test sees it, and as jobs see it (not the
	// same path on 24.11+: the nodes' FSx mount lives in the Debian root's
	// mount namespace; see stack.CheckpointRoot)
	ckptRoot, nodeCkpt := s.CheckpointRoot(), s.NodeCheckpointRoot()
	ahome, vhome := home(t, s, atk), home(t, s, vic)

	// the victim's job: a checkpoint only it can read
	writeAs(t, vic, filepath.Join(vhome, "train.sh"), "#!/bin/bash\n"+
		"echo \"dir=$BURST_CHECKPOINT_DIR $(stat -c '%U %a %F' \"$BURST_CHECKPOINT_DIR\")\"\n"+
		"echo secret-weights > \"$BURST_CHECKPOINT_DIR/model.pt\"\nsleep ${HOLD:-300}\n", 0o755)
	vjob := sbatchAs(t, s, vic, vhome, "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--output="+filepath.Join(vhome, "%j.out"), filepath.Join(vhome, "train.sh"))
	waitJob(t, s, vjob, 2*time.Minute, "RUNNING")
	vin := instanceOfJob(t, s, vjob, time.Minute)
	vnode := ec2p.NodeOf(vin.Tags)
	vdir, nodeVdir := filepath.Join(ckptRoot, vjob), filepath.Join(nodeCkpt, vjob)
	eventually(t, 30*time.Second, "the victim's checkpoint", func() bool {
		_, err := os.Stat(filepath.Join(vdir, "model.pt"))
		return err == nil
	})
	if fi, err := os.Lstat(vdir); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(vic.UID) {
		t.Fatalf("victim's checkpoint directory %v %v; want 0700, owned by %s", fi, err, vic.Name)
	}
	if fi, _ := os.Lstat(ckptRoot); fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode()&os.ModeSticky != 0 {
		t.Errorf("checkpoint root mode %v, want root's 0755", fi.Mode())
	}

	// the attacker's job, on a node of its own
	writeAs(t, atk, filepath.Join(ahome, "attack.sh"), fmt.Sprintf("#!/bin/bash\n%s -params %s -out %s\nwhile [ ! -e %s ]; do sleep 0.5; done\n",
		attack, filepath.Join(ahome, "params.json"), filepath.Join(ahome, "results.json"), filepath.Join(ahome, "done")), 0o755)
	ajob := sbatchAs(t, s, atk, ahome, "--gres=gpu:1", "--constraint=l4", "--account=demo", "--output="+filepath.Join(ahome, "%j.out"), filepath.Join(ahome, "attack.sh"))
	waitJob(t, s, ajob, 2*time.Minute, "RUNNING")
	ain := instanceOfJob(t, s, ajob, time.Minute)
	anode := ec2p.NodeOf(ain.Tags)
	cred := filepath.Join(s.RunDir(anode), bootstrapCredential)
	eventually(t, 30*time.Second, "both nodes' credentials and launch records", func() bool {
		d := dumpStore(t, s)
		_, err1 := os.Stat(cred)
		return err1 == nil && len(d["node_identities"]) == 2 && len(d["instances"]) == 2
	})
	time.Sleep(2 * time.Second) // let the hooks' last writes (prolog wait) land
	before := dumpStore(t, s)

	params := map[string]any{
		"imds":      []string{ain.IMDSURL, vin.IMDSURL, "http://169.254.169.254", "http://[fd00:ec2::254]"},
		"sizer_url": s.Cfg.Sizer.URL, "ca_file": s.Cfg.Sizer.TLS.CAFile,
		"files": []string{cred, filepath.Join(s.RunDir(anode), "identity.nonce"), filepath.Join(s.RunDir(vnode), bootstrapCredential),
			s.Cfg.Slurm.MungeKeyPath, filepath.Join(s.Dir, "userdata", ain.ID), s.Cfg.Sizer.TokenFile, filepath.Join(nodeVdir, "model.pt")},
		"instance": ain.ID, "node": anode, "victim_job": mustAtoi(t, vjob), "ckpt_root": nodeCkpt,
		"future_jobs": []string{strconv.Itoa(mustAtoi(t, ajob) + 1), strconv.Itoa(mustAtoi(t, ajob) + 2)}, "symlink_into": ahome,
		"route_file": s.Cfg.Sizer.TokenFile + ".route",
		"poweroff":   []string{s.PoweroffURL(ain.ID), s.PoweroffURL(vin.ID)},
	}
	pb, _ := json.Marshal(params)
	writeAs(t, atk, filepath.Join(ahome, "params.json"), string(pb), 0o600)
	var results []attackResult
	eventually(t, 90*time.Second, "the attack job's results", func() bool {
		b, err := os.ReadFile(filepath.Join(ahome, "results.json"))
		return err == nil && json.Unmarshal(b, &results) == nil
	})
	if len(results) < 17 {
		t.Fatalf("only %d attack results: %+v", len(results), results)
	}
	for _, r := range results {
		if r.Succeeded {
			t.Errorf("ATTACK SUCCEEDED as %s: %s: %s", atk.Name, r.Attack, r.Detail)
		} else {
			t.Logf("refused: %-90s %s", r.Attack, r.Detail)
		}
	}

	// root on the attacker's node (the node itself compromised) holds its
	// real credential and still cannot make the sizer believe anything else
	tok, err := auth.LoadCredential(cred)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.SizerClient(tok)
	if err != nil {
		t.Fatal(err)
	}
	apiCode := func(err error) string {
		var ae *sizerclient.APIError
		if errors.As(err, &ae) {
			return ae.Code
		}
		return fmt.Sprint(err)
	}
	if err := nc.Interruption(ctx, sizerapi.Interruption{Action: "terminate", Time: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}); apiCode(err) != sizerapi.CodeBadRequest {
		t.Errorf("node credential, interruption dated 2100: %v", err)
	}
	if err := nc.Interruption(ctx, sizerapi.Interruption{InstanceID: vin.ID, Action: "terminate"}); apiCode(err) != sizerapi.CodeForbidden {
		t.Errorf("node credential, interruption of the victim's instance: %v", err)
	}
	now := time.Now()
	res, err := nc.Report(ctx, sizerapi.ReportBatch{Records: []sizerapi.Record{{Seq: 1 << 40, Time: now, Kind: sizerapi.KindGPU,
		GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 1, MemoryUsedBytes: 1 << 20, MemoryTotalBytes: 24 << 30, JobIDs: []uint32{uint32(mustAtoi(t, vjob))}}}}}})
	if err != nil || res.Accepted != 0 || res.Refused != 1 {
		t.Errorf("node credential, samples for the victim's job: %+v %v", res, err)
	}
	if _, err := nc.Report(ctx, sizerapi.ReportBatch{Node: vnode, Records: []sizerapi.Record{}}); apiCode(err) != sizerapi.CodeForbidden {
		t.Errorf("node credential, a batch for the victim's node: %v", err)
	}
	storeUnchanged(t, "the attacks", before, dumpStore(t, s))

	// the firewall is by user: root in the same node reaches its metadata
	if n, ok := s.Cluster.Node(anode); !ok {
		t.Fatal("attacker's node namespace gone")
	} else if out, err := exec.Command("/usr/bin/nsenter", "--net="+n.Netns(), "--", attack, "-as-root-probe", ain.IMDSURL).CombinedOutput(); err != nil {
		t.Errorf("root on the node cannot reach its own IMDS: %v %s", err, out)
	}
	// user data as anyone allowed to describe the instance sees it
	munge, _ := os.ReadFile(s.Cfg.Slurm.MungeKeyPath)
	for _, id := range []string{ain.ID, vin.ID} {
		ud := userData(t, s, id)
		for _, secret := range []string{"bn1:", "bn2:", "br2:", s.Token, "PRIVATE KEY", base64.StdEncoding.EncodeToString(munge), string(munge)} {
			if secret != "" && strings.Contains(ud, secret) {
				t.Errorf("user data of %s holds a secret (%.12q...)", id, secret)
			}
		}
	}
	for _, p := range []string{s.Cfg.Slurm.MungeKeyPath, cred} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v: readable beyond its owner", p, fi.Mode())
		}
	}
	writeAs(t, atk, filepath.Join(ahome, "done"), "", 0o644)
	waitJob(t, s, ajob, time.Minute, "COMPLETED")

	// checkpoint entries planted while the root was world-writable (before
	// this release): the victim's next two jobs must get their own
	// directories, and the planted entries are moved aside
	next1, next2 := strconv.Itoa(mustAtoi(t, ajob)+1), strconv.Itoa(mustAtoi(t, ajob)+2)
	planted := filepath.Join(ckptRoot, next1)
	os.Mkdir(planted, 0o777)
	os.Chmod(planted, 0o777)
	os.Chown(planted, atk.UID, atk.GID)
	writeAs(t, atk, filepath.Join(planted, "model.pt"), "attacker-weights", 0o666)
	lure := filepath.Join(ahome, "lure")
	os.Mkdir(lure, 0o777)
	os.Chown(lure, atk.UID, atk.GID)
	os.Chmod(lure, 0o777)
	if err := os.Symlink(lure, filepath.Join(ckptRoot, next2)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{next1, next2} {
		id := sbatchAs(t, s, vic, vhome, "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--export=ALL,HOLD=0", "--output="+filepath.Join(vhome, "%j.out"), filepath.Join(vhome, "train.sh"))
		if id != want {
			t.Fatalf("the victim's job got id %s, the planted entries were for %s", id, want)
		}
	}
	for _, id := range []string{next1, next2} {
		waitJob(t, s, id, 3*time.Minute, "COMPLETED")
		dir := filepath.Join(ckptRoot, id)
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(vic.UID) {
			t.Errorf("job %s's checkpoint directory %v %v; want the victim's own 0700 directory", id, fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "model.pt")); string(b) != "secret-weights\n" {
			t.Errorf("job %s's checkpoint is %q, not its own", id, b)
		}
		moved, _ := filepath.Glob(dir + ".moved-*")
		if len(moved) != 1 {
			t.Errorf("job %s: the planted entry was not moved aside: %v", id, moved)
		}
		out, _ := os.ReadFile(filepath.Join(vhome, id+".out"))
		t.Logf("job %s: %s", id, strings.TrimSpace(string(out)))
	}
	if entries, _ := os.ReadDir(lure); len(entries) != 0 {
		t.Errorf("the victim's job wrote through the symlink into the attacker's directory: %v", entries)
	}
	readAs := exec.Command("/bin/cat", filepath.Join(ckptRoot, next1, "model.pt"))
	readAs.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(atk.UID), Gid: uint32(atk.GID)}}
	if out, err := readAs.CombinedOutput(); err == nil {
		t.Errorf("the attacker read the victim's checkpoint: %s", out)
	}

	// a dead instance's credential: the victim's job ends, its instance is
	// terminated; its credential (stolen earlier) is refused
	vtok, err := auth.LoadCredential(filepath.Join(s.RunDir(vnode), bootstrapCredential))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cluster.Run(ctx, "scancel", vjob); err != nil {
		t.Fatal(err)
	}
	// terminated, and settled in the ledger: closed at EC2's own transition
	// time (end source ec2) and no EC2 event or ledger pass still to come
	eventually(t, 90*time.Second, "the victim's instance terminated and its ledger entry closed by EC2's record", func() bool {
		in, _ := s.Emu.Instance(vin.ID)
		for _, row := range dumpStore(t, s)["instances"] {
			if strings.HasPrefix(row, vin.ID+" ") && strings.Contains(row, "| ec2 |") {
				return in.State == "terminated"
			}
		}
		return false
	})
	before = dumpStore(t, s)
	eventually(t, 60*time.Second, "the sizer's store settled (no change for 3 s)", func() bool {
		time.Sleep(3 * time.Second)
		now := dumpStore(t, s)
		settled := reflect.DeepEqual(before, now)
		before = now
		return settled
	})
	vc, _ := s.SizerClient(vtok)
	if _, err := vc.Report(ctx, sizerapi.ReportBatch{Records: []sizerapi.Record{{Seq: 1 << 41, Time: time.Now(), Kind: sizerapi.KindGPU,
		GPUs: []sizerapi.GPUReading{{Index: 0, JobIDs: []uint32{uint32(mustAtoi(t, vjob))}}}}}}); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("a terminated instance's credential, report: %v", err)
	}
	if _, err := vc.RenewCredential(ctx); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("a terminated instance's credential, renewal: %v", err)
	}
	if err := vc.Interruption(ctx, sizerapi.Interruption{Action: "terminate"}); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("a terminated instance's credential, interruption: %v", err)
	}
	storeUnchanged(t, "a terminated instance's credential", before, dumpStore(t, s))
}

// bootstrapCredential is the node credential's file in a node's run directory.
const bootstrapCredential = "agent.credential"

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("job id %q: %v", s, err)
	}
	return n
}

// TestFleetCollidingLaunchIndexes: EC2 gives every instance of a fleet the
// same ami-launch-index; a two-node job still boots, each node learning its
// name from the sizer (the node tag burst-resume set after launch).
func TestFleetCollidingLaunchIndexes(t *testing.T) {
	s := start(t, stack.Options{Emulator: ec2emu.Options{LaunchIndexes: ec2emu.LaunchIndexCollide}})
	id := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun -l printenv SLURMD_NODENAME")
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	all := s.Emu.Instances()
	if len(all) != 2 || all[0].LaunchIndex != all[1].LaunchIndex {
		t.Fatalf("want 2 instances with one launch index, got %+v", all)
	}
	out, _ := os.ReadFile(s.Cluster.Dir() + "/work/slurm-" + id + ".out")
	if !strings.Contains(string(out), ": l4-1") || !strings.Contains(string(out), ": l4-2") {
		t.Errorf("the job did not run on both nodes:\n%s", out)
	}
}

// TestDeadManSwitchPowersOff: nodes have no EC2 rights; when Slurm has
// abandoned a node whose instance burst cannot terminate (here every
// TerminateInstances fails), the node's own dead-man switch powers it off
// (the emulator's shutdown control stands for poweroff), and
// InstanceInitiatedShutdownBehavior=terminate, set at launch, ends the
// on-demand instance.
func TestDeadManSwitchPowersOff(t *testing.T) {
	s := start(t, stack.Options{NodeEnv: []string{"BURST_DEAD_MAN_AFTER=3s", "BURST_DEAD_MAN_POLL=1s"}})
	for _, typ := range []string{"g5.xlarge", "g5.2xlarge"} {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			s.Emu.SetCapacity(typ, z, "spot", 0) // on-demand: its poweroff would only stop it without the launch setting
		}
	}
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--wrap", "sleep 1")
	in := instanceOfJob(t, s, id, 2*time.Minute)
	if in.Lifecycle == "spot" {
		t.Fatalf("instance %s is spot; want on-demand", in.ID)
	}
	s.Emu.InjectFault(ec2emu.Fault{Action: "TerminateInstances", Code: "UnauthorizedOperation", Fraction: 1, For: time.Hour})
	waitJob(t, s, id, time.Minute, "COMPLETED")
	eventually(t, 2*time.Minute, "the node's dead-man switch to end its instance", func() bool {
		cur, _ := s.Emu.Instance(in.ID)
		return cur.State == "terminated" || cur.State == "shutting-down"
	})
	cur, _ := s.Emu.Instance(in.ID)
	if cur.StateReasonCode != "Client.InstanceInitiatedShutdown" {
		t.Errorf("instance ended with %s (%s), want the instance's own poweroff", cur.StateReasonCode, cur.StateReasonMessage)
	}
	if cur.ShutdownBehavior != "terminate" {
		t.Errorf("shutdown behaviour %q", cur.ShutdownBehavior)
	}
}

// attackerAndVictim are the security tests' two ordinary users: burstatk
// attacks, burstvic's jobs are the target.
func attackerAndVictim(t *testing.T) (atk, vic harness.User) {
	t.Helper()
	var err error
	if atk, err = harness.EnsureUser("burstatk"); err != nil {
		t.Fatal(err)
	}
	if vic, err = harness.EnsureUser("burstvic"); err != nil {
		t.Fatal(err)
	}
	return atk, vic
}
