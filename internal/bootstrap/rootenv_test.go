package bootstrap

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/userdata"
)

// rootEnv is one fake "instance": temp dirs, a real munged (started by the
// bootstrap), a real bind mount for the test switch, and fake slurmd, agent
// and scontrol scripts that record what they were given.
type rootEnv struct {
	dir, runDir, localFS, mountPoint, seq string
	ud                                    userdata.UserData
	opts                                  Options
	fakes                                 *identityFakes
	netns                                 string // the scratch namespace the IMDS firewall goes into
}

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPING in -short mode (make test-unit starts no daemon): bind mount, munged")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (bind mount, munged); run the bootstrap root tests as root")
	}
	for _, p := range []string{"/usr/sbin/munged", "/usr/bin/mount", "/usr/bin/umount"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPING: %s missing (apt-get install munge mount)", p)
		}
	}
}

func newRootEnv(t *testing.T) *rootEnv {
	needRoot(t)
	dir := t.TempDir()
	// munged wants every directory above its socket searchable by all.
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	e := &rootEnv{dir: dir, runDir: filepath.Join(dir, "run"), localFS: filepath.Join(dir, "shared-fsx"),
		mountPoint: filepath.Join(dir, "inst", "fsx"), seq: filepath.Join(dir, "seq.log")}
	for _, d := range []string{e.localFS, filepath.Join(dir, "bin"), filepath.Join(dir, "keys")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "keys"), 0o700)
	os.WriteFile(filepath.Join(e.localFS, "marker"), []byte("shared\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte("ClusterName=lab\n"), 0o644)
	key := make([]byte, 128)
	rand.Read(key)
	keySrc := filepath.Join(dir, "keys", "cluster.key")
	if err := os.WriteFile(keySrc, key, 0o400); err != nil {
		t.Fatal(err)
	}
	e.ud = userdata.UserData{
		NodeName: "gpu-7",
		Cluster:  "lab",
		IssuedAt: time.Now(),
		// file mode: configless would need munged on the host's default socket
		// (realslurm_test.go covers configless in a private mount namespace).
		Slurm: userdata.Slurm{Controllers: []string{"127.0.0.1"}, Port: 16817, ConfMode: userdata.ConfFile,
			ConfPath: filepath.Join(dir, "slurm.conf")},
		Munge: userdata.Munge{KeySource: "file://" + keySrc, KeyPath: filepath.Join(dir, "inst", "munge", "munge.key"),
			Socket: filepath.Join(dir, "inst", "munge-run", "munge.sock")},
		FSx: userdata.FSx{DNSName: "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", MountName: "abcdef12",
			MountPoint: e.mountPoint, CheckpointRoot: filepath.Join(e.mountPoint, "checkpoints")},
		Agent: userdata.Agent{IMDSEndpoint: "http://127.0.0.1:2"},
		Test:  &userdata.Test{LocalFSDir: e.localFS},
	}
	e.fakes = newIdentityFakes(t, "i-0123456789abcdef7", "gpu-7")
	e.ud.Agent.SizerURL, e.ud.Agent.SizerCA = e.fakes.Sizer, string(e.fakes.CA)
	nft, netns := scratchNft(t)
	e.netns = netns
	e.opts = Options{
		Exec:         ExecDirect,
		RunDir:       e.runDir,
		IMDSEndpoint: e.fakes.IMDS,
		NonceFile:    filepath.Join(dir, "state", "identity.nonce"),
		BootGuard:    time.Second,
		StartCheck:   500 * time.Millisecond,
		Logger:       quietLogger(),
		Commands: Commands{
			Slurmd:   e.script(t, "slurmd", fakeDaemon),
			Agent:    e.script(t, "burst-agent", fakeDaemon),
			Scontrol: e.script(t, "scontrol", fakeScontrol),
			Nft:      nft,
		},
	}
	t.Cleanup(func() { e.teardown(t) })
	return e
}

// fakeDaemon answers -V with @DIR@/<NAME>.version (default a 22.05 slurmd);
// otherwise it records its argv, whether munge, the mount and the checkpoint
// root were ready when it started, its signal state and the time, then stays
// up like a daemon (or exits 1 when FAIL_<NAME> exists).
const fakeDaemon = `#!/bin/sh
name=$(basename "$0")
if [ "$1" = -V ]; then cat @DIR@/$name.version 2>/dev/null || echo "slurm-wlm 22.05.8"; exit 0; fi
# one block per daemon, appended in one write: the bootstrap starts slurmd
# and burst-agent close together, and their lines must not interleave
out=$name; for a in "$@"; do out="$out [$a]"; done
nl='
'
[ -S @SOCK@ ] && out="$out$nl$name: munge-up"
[ -f @MP@/marker ] && out="$out$nl$name: fsx-mounted"
[ -d @CKPT@ ] && out="$out$nl$name: ckpt-root"
printf '%s\n' "$out" >> @SEQ@
# read our own status with builtins only: a forked grep could catch dash in
# its fork window, when it blocks every signal
while IFS= read -r l; do case $l in SigBlk:*|SigIgn:*) echo "$l" ;; esac; done < /proc/$$/status > @DIR@/$name.sig
env | grep '^BURST_' | sort > @DIR@/$name.env
date +%s.%N > @DIR@/$name.started.tmp
mv @DIR@/$name.started.tmp @DIR@/$name.started
if [ -e @DIR@/FAIL_$name ]; then echo "$name: fatal: Unable to establish controller connection" >&2; exit 1; fi
exec sleep 300
`

// fakeScontrol answers `show node` with the state in @DIR@/STATE, or like
// slurmctld: registered once the fake slurmd has started, powering up before.
// It records an update's arguments and SLURM_CONF.
const fakeScontrol = `#!/bin/sh
if [ "$1" = show ]; then
  if [ -f @DIR@/STATE ]; then st=$(cat @DIR@/STATE)
  elif [ -f @DIR@/slurmd.started ]; then st=IDLE+CLOUD
  else st=IDLE+CLOUD+NOT_RESPONDING+POWERING_UP; fi
  echo "NodeName=gpu-7 Arch=x86_64 CoresPerSocket=1 State=$st ThreadsPerCore=1 Reason=none [root@2026-11-29T14:00:00]"
  exit 0
fi
for a in "$@"; do printf '%s\n' "$a"; done > @DIR@/scontrol.args
cp "$SLURM_CONF" @DIR@/scontrol.conf
echo "scontrol $1" >> @SEQ@
`

func (e *rootEnv) script(t *testing.T, name, body string) string {
	r := strings.NewReplacer("@SEQ@", e.seq, "@SOCK@", e.ud.Munge.Socket, "@MP@", e.mountPoint,
		"@CKPT@", e.ud.FSx.CheckpointRoot, "@DIR@", e.dir)
	p := filepath.Join(e.dir, "bin", name)
	if err := os.WriteFile(p, []byte(r.Replace(body)), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *rootEnv) writeUD(t *testing.T) {
	doc, err := userdata.Encode(e.ud)
	if err != nil {
		t.Fatal(err)
	}
	e.opts.UserDataFile = filepath.Join(e.dir, "user-data")
	if err := os.WriteFile(e.opts.UserDataFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}
}

// teardown stops only the processes this test's bootstrap started (by pid
// file) and unmounts its bind mount.
func (e *rootEnv) teardown(t *testing.T) {
	pids, _ := filepath.Glob(filepath.Join(e.runDir, "*.pid"))
	for _, pf := range pids {
		data, err := os.ReadFile(pf)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := Unmount(e.mountPoint); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if ok, _ := isMountPoint(e.mountPoint); ok {
		t.Errorf("teardown: %s still mounted after Unmount", e.mountPoint)
	}
}

func (e *rootEnv) read(t *testing.T, name string) string {
	data, err := os.ReadFile(filepath.Join(e.dir, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(data)
}
