package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Env is where a cluster's Slurm processes run. For the host's Slurm it is
// the host itself. For a Debian root it is a private mount namespace, held
// open by an anchor process (`sleep infinity`), whose root is a writable
// overlay (tmpfs upper layer) over the read-only cached root, with the
// host's /proc, /sys, /dev, /etc/hosts and /etc/resolv.conf, a private
// tmpfs /run, and host directories (os.TempDir(), the burst binaries, ...)
// bind-mounted at their own paths:
// every path under them means the same file inside and outside. Processes
// enter it with `nsenter -t ANCHOR -m -r`; the network namespace stays the
// host's (or a node's, with --net). Nothing of it shows in the host's mount
// table, and it disappears with the last process in it, which Close kills.
type Env struct {
	slurm  Slurm
	id     string
	anchor *proc
	mntNS  string // "mnt:[N]" of the anchor
	mount  string // host dir whose namespace-private tmpfs holds the overlay
	ownDir string // made by Enter (holds mount and the log), removed by Close
	record string
	mu     sync.Mutex
	closed bool
}

// EnvOptions configure Enter.
type EnvOptions struct {
	// Binds are host directories made visible at the same path inside the
	// root; os.TempDir() is always one. Nested and repeated ones are merged.
	Binds []string
	// MountDir is an empty host directory the overlay is mounted on inside
	// the namespace (the host sees it empty); default: a new temporary
	// directory, removed by Close.
	MountDir string
	// LogPath receives the anchor's output (set-up errors).
	LogPath string
	// Environ is the anchor's environment; CleanupStale kills the processes
	// carrying a crashed run's SLURM_CONF, the anchor included.
	Environ []string
	// ID names the run in its record (default: random).
	ID string
}

// anchorScript sets up the namespace (run by /bin/sh under `unshare
// --mount --propagation private`): $1 the mount dir, $2 the Slurm root, then
// the directories to bind. pivot_root detaches every host mount the
// namespace copied, so it holds nothing of the host's but what it binds.
const anchorScript = `set -eu
M=$1; R=$2; shift 2
mount -t tmpfs -o mode=755 bst-root "$M"
mkdir "$M/upper" "$M/work" "$M/root"
mount -t overlay bst-root -o "lowerdir=$R,upperdir=$M/upper,workdir=$M/work" "$M/root"
N=$M/root
mount -t proc proc "$N/proc"
mount --rbind /sys "$N/sys"
mount --rbind /dev "$N/dev"
mount -t tmpfs -o mode=755 tmpfs "$N/run"
for d in "$@"; do mkdir -p "$N$d"; mount --bind "$d" "$N$d"; done
# the host's names: a minbase root has no /etc/hosts, and looking up the
# host name in DNS from a node's network namespace waits for a timeout
for f in /etc/hosts /etc/resolv.conf; do
  if [ -f "$f" ]; then touch "$N$f"; mount --bind "$f" "$N$f"; fi
done
# and host names from files only: 24.11+ slurmctld resolves every munge
# client's address, and a resolver that does not answer stalls it 5 s
sed -i 's/^hosts:.*/hosts: files/' "$N/etc/nsswitch.conf"
mkdir "$N/.bst-oldroot"
cd "$N"
pivot_root . .bst-oldroot
umount -l /.bst-oldroot
rmdir /.bst-oldroot
exec sleep infinity
`

// Enter starts the environment of s (for the host's Slurm: nothing to
// start). Close it when done; CleanupStale removes it after a crash.
func (s Slurm) Enter(ctx context.Context, o EnvOptions) (*Env, error) {
	e := &Env{slurm: s, id: o.ID}
	if s.Host() {
		return e, nil
	}
	if e.id == "" {
		e.id = randomID()
	}
	for _, b := range []string{"/usr/bin/unshare", "/usr/bin/nsenter"} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("entering the Slurm %s root: %s missing (install util-linux)", s.Release, b)
		}
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", stateDir, err)
	}
	binds, err := mergeBinds(append([]string{os.TempDir()}, o.Binds...))
	if err != nil {
		return nil, err
	}
	// the record goes first: a crash from here on is cleaned up
	e.record = filepath.Join(stateDir, e.id+"-env.json")
	st, _ := procStartTime(os.Getpid())
	if err := e.writeRecord(runRecord{ID: e.id, PID: os.Getpid(), StartTime: st}); err != nil {
		return nil, err
	}
	e.mount = o.MountDir
	logPath := o.LogPath
	if e.mount == "" {
		// named so that CleanupStale may remove it (bst-<id>-...)
		if e.ownDir, err = os.MkdirTemp("", Prefix+"-"+e.id+"-env-"); err != nil {
			e.Close()
			return nil, fmt.Errorf("entering the Slurm root: %w", err)
		}
		e.mount = filepath.Join(e.ownDir, "root")
		if err := os.Mkdir(e.mount, 0o755); err != nil {
			e.Close()
			return nil, err
		}
		if err := e.writeRecord(runRecord{ID: e.id, PID: os.Getpid(), StartTime: st, Dir: e.ownDir}); err != nil {
			e.Close()
			return nil, err
		}
	}
	if logPath == "" {
		logPath = filepath.Join(cmp.Or(e.ownDir, filepath.Dir(e.mount)), "anchor.log")
	}
	argv := append([]string{"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", anchorScript, "bst-anchor", e.mount, s.Root}, binds...)
	env := o.Environ
	if env == nil {
		env = os.Environ()
	}
	if e.anchor, err = startProc("anchor", logPath, env, "/", argv...); err != nil {
		e.Close()
		return nil, err
	}
	pid := e.anchor.cmd.Process.Pid
	// unshare execs sh, which execs sleep: the anchor keeps its pid and is
	// ready once it is sleep
	deadline := time.Now().Add(20 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if e.anchor.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			e.Close()
			return nil, fmt.Errorf("entering the Slurm %s root %s: the namespace set-up failed (%v); its output:\n%s", s.Release, s.Root, e.anchor.err, tail(logPath, 10))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e.mntNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err != nil {
		e.Close()
		return nil, fmt.Errorf("reading the anchor's mount namespace: %w", err)
	}
	if self, _ := os.Readlink("/proc/self/ns/mnt"); self == e.mntNS {
		e.Close()
		return nil, errors.New("entering the Slurm root: the anchor shares this process's mount namespace")
	}
	ast, _ := procStartTime(pid)
	if err := e.writeRecord(runRecord{ID: e.id, PID: os.Getpid(), StartTime: st, Dir: e.ownDir, AnchorPID: pid, AnchorStart: ast, MntNS: e.mntNS}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Env) writeRecord(r runRecord) error {
	b, _ := json.Marshal(r)
	if err := os.WriteFile(e.record, b, 0o644); err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}
	return nil
}

// mergeBinds cleans, checks and de-nests bind directories (a directory
// inside another is kept only when it is a mount point of its own: binds
// are not recursive).
func mergeBinds(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		d = filepath.Clean(d)
		if !filepath.IsAbs(d) || d == "/" || strings.ContainsAny(d, "\n\x00") {
			return nil, fmt.Errorf("bind directory %q: want an absolute path other than /", d)
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("bind directory %q: not a directory (%v)", d, err)
		}
		out = append(out, d)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	var merged []string
	for _, d := range out {
		if len(merged) > 0 && strings.HasPrefix(d, merged[len(merged)-1]+"/") && !mountPoint(d) {
			continue
		}
		merged = append(merged, d)
	}
	return merged, nil
}

// mountPoint says whether d is on another file system than its parent.
func mountPoint(d string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(d, &a) != nil || syscall.Stat(filepath.Dir(d), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// Slurm is the installation the environment runs.
func (e *Env) Slurm() Slurm { return e.slurm }

// AnchorPID is the process holding the namespace (0 on the host).
func (e *Env) AnchorPID() int {
	if e.anchor == nil {
		return 0
	}
	return e.anchor.cmd.Process.Pid
}

// Argv returns the command line that runs argv inside the environment, in
// directory dir (a path valid inside; "" keeps the caller's), and, if netns
// is set, in that network namespace (/run/netns/NAME on the host).
func (e *Env) Argv(netns, dir string, argv ...string) []string {
	if e.anchor == nil {
		if netns == "" {
			return argv
		}
		return append([]string{"/usr/bin/nsenter", "--net=" + netns, "--"}, argv...)
	}
	// nsenter -r keeps the caller's working directory, which is unreachable
	// from the new root: change into dir explicitly
	out := []string{"/usr/bin/nsenter", "-t", fmt.Sprint(e.AnchorPID()), "-m", "-r"}
	if netns != "" {
		out = append(out, "--net="+netns)
	}
	if dir == "" {
		dir = "/"
	}
	return append(append(out, "--", "/usr/bin/env", "--chdir="+dir), argv...)
}

// Command is exec.CommandContext for argv inside the environment, with
// working directory dir (on the host and inside).
func (e *Env) Command(ctx context.Context, netns, dir string, argv ...string) *exec.Cmd {
	a := e.Argv(netns, dir, argv...)
	cmd := exec.CommandContext(ctx, a[0], a[1:]...)
	cmd.Dir = dir
	return cmd
}

// Wrapper is a shell script for the host that runs prog (a path inside)
// with its arguments inside the environment, in the caller's directory when
// that is visible inside, else in fallback.
func (e *Env) Wrapper(prog, fallback string) string {
	if e.anchor == nil {
		return fmt.Sprintf("#!/bin/sh\nexec %s \"$@\"\n", shellQuote(prog))
	}
	return fmt.Sprintf("#!/bin/sh\n# %s of %s, inside the cluster's mount namespace (anchor pid %d)\n"+
		"exec /usr/bin/nsenter -t %d -m -r -- /bin/sh -c 'cd \"$0\" 2>/dev/null || cd %s || exit 1; exec \"$@\"' \"$PWD\" %s \"$@\"\n",
		filepath.Base(prog), e.slurm, e.AnchorPID(), e.AnchorPID(), shellQuote(fallback), shellQuote(prog))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Close kills every process in the namespace (the anchor last of all
// holds it) and waits until the namespace is gone. Idempotent.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if e.anchor != nil {
		if e.mntNS != "" {
			if list := pidsInMntNS(e.mntNS); len(list) > 0 {
				if err := killPids(list); err != nil {
					errs = append(errs, fmt.Errorf("emptying the Slurm root's namespace: %w", err))
				}
			}
		}
		e.anchor.stop(0)
	}
	if e.ownDir != "" {
		if err := os.RemoveAll(e.ownDir); err != nil {
			errs = append(errs, err)
		}
	}
	if e.record != "" {
		if err := os.Remove(e.record); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidsInMntNS lists the processes in mount namespace ns ("mnt:[N]"),
// sparing this process and its ancestors.
func pidsInMntNS(ns string) []int {
	spare := ancestors()
	var out []int
	for _, pid := range pids() {
		if spare[pid] {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

// killEnvOf kills what a dead run's record says it left in a namespace: if
// the anchor still runs (same pid and start time, so the namespace id is
// still its), every process in that namespace.
func killEnvOf(r runRecord) ([]int, error) {
	if r.AnchorPID == 0 || r.MntNS == "" {
		return nil, nil
	}
	if st, err := procStartTime(r.AnchorPID); err != nil || st != r.AnchorStart {
		return nil, nil
	}
	if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", r.AnchorPID)); l != r.MntNS {
		return nil, nil
	}
	if self, _ := os.Readlink("/proc/self/ns/mnt"); self == r.MntNS {
		return nil, nil
	}
	list := pidsInMntNS(r.MntNS)
	return list, killPids(list)
}
