package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// proc is a process the harness started in its own session.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid after done is closed
	log  string
}

// startProc starts argv in a new session (own process group), with an empty
// signal mask, stdout+stderr appended to logPath, and env as its environment.
func startProc(name, logPath string, env []string, dir string, argv ...string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", name, err)
	}
	defer lf.Close() // the child holds its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := slurm.StartUnblocked(cmd); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs
// the group and waits for the leader.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		// The leader is gone; its group may still hold children.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stopAll stops processes concurrently.
func stopAll(grace time.Duration, ps ...*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(grace) }()
	}
	wg.Wait()
}

// pids lists the numeric entries of /proc.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// ancestors returns this process and its ancestors, which scans must spare.
func ancestors() map[int]bool {
	m := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !m[pid]; {
		m[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// pid (comm) state ppid ...; comm may contain spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return m
}

// pidsWithEnv returns processes whose initial environment contains entry
// (e.g. "SLURM_CONF=/tmp/bst-.../etc/slurm.conf"), sparing this process and
// its ancestors.
func pidsWithEnv(entry string) []int {
	spare := ancestors()
	want := []byte(entry)
	var out []int
	for _, pid := range pids() {
		if spare[pid] {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(b, []byte{0}) {
			if bytes.Equal(e, want) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// pidsInNetns returns the processes whose network namespace is the one
// mounted at nsPath (/run/netns/NAME).
func pidsInNetns(nsPath string) ([]int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(nsPath, &st); err != nil {
		return nil, err
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	spare := ancestors()
	var out []int
	for _, pid := range pids() {
		if spare[pid] {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out, nil
}

// killPids SIGKILLs pids and waits (up to 5 s) until they are gone or zombies.
func killPids(list []int) error {
	for _, pid := range list {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range list {
		for alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("killing pid %d: still alive 5 s after SIGKILL", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z'
}

// procStartTime returns field 22 of /proc/PID/stat (start time in clock
// ticks since boot), which with the pid identifies a process.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
