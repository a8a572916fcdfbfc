package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// startDaemon starts argv as a detached process (own session, stdin from
// /dev/null, output appended to RunDir/<name>.log, pid in RunDir/<name>.pid).
// With check > 0 it waits that long and fails if the process exited.
func (b *boot) startDaemon(ctx context.Context, name string, argv, env []string, check time.Duration) (<-chan error, error) {
	if err := b.cleanSignalsOK(); err != nil {
		return nil, err
	}
	if b.needClean {
		argv = append(append([]string{}, b.o.CleanExec...), argv...)
	}
	logPath := filepath.Join(b.o.RunDir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	logf.Close() // the child holds its own descriptor
	if err := os.WriteFile(filepath.Join(b.o.RunDir, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		b.log.Warn("writing pid file", "daemon", name, "err", err)
	}
	b.log.Info("daemon started", "daemon", name, "pid", pid, "argv", argv, "log", logPath)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); close(done) }() // reaps the child whenever it exits
	if check <= 0 {
		return done, nil
	}
	select {
	case err := <-done:
		return done, fmt.Errorf("%s exited within %s of starting (%v): %s", name, check, err, tailFile(logPath, 3))
	case <-ctx.Done():
		return done, ctx.Err()
	case <-time.After(check):
		return done, nil
	}
}

func (b *boot) daemonLogHint(name string) string {
	if b.o.Exec == ExecSystemd {
		return "journalctl -u " + b.o.Units.Munge
	}
	return filepath.Join(b.o.RunDir, name+".log") + " (" + tailFile(filepath.Join(b.o.RunDir, name+".log"), 2) + ")"
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > 8192 {
		data = data[len(data)-8192:]
	}
	return lastLines(data, n)
}

// Signals whose inherited blocked or ignored state would leak into daemons.
var watchedSignals = []struct {
	sig  syscall.Signal
	name string
}{{syscall.SIGHUP, "SIGHUP"}, {syscall.SIGINT, "SIGINT"}, {syscall.SIGTERM, "SIGTERM"}, {syscall.SIGUSR1, "SIGUSR1"}, {syscall.SIGUSR2, "SIGUSR2"}}

// cleanSignalsOK decides once whether daemons must go through CleanExec.
// Go starts children with the signal mask this process inherited, so a
// bootstrap started from slurmctld's ResumeProgram (SIGTERM blocked) would
// start a slurmd that ignores SIGTERM.
func (b *boot) cleanSignalsOK() error {
	if b.maskChecked {
		return nil
	}
	b.maskChecked = true
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.log.Warn("cannot read own signal mask; assuming it is clean", "err", err)
		return nil
	}
	blk, ign, err := ParseSigMasks(string(status))
	if err != nil {
		b.log.Warn("cannot parse own signal mask; assuming it is clean", "err", err)
		return nil
	}
	var bad []string
	for _, s := range watchedSignals {
		bit := uint64(1) << (uint(s.sig) - 1)
		if blk&bit != 0 {
			bad = append(bad, s.name+" blocked")
		}
		if ign&bit != 0 {
			bad = append(bad, s.name+" ignored")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if len(b.o.CleanExec) == 0 {
		return fmt.Errorf("bootstrap runs with %s (inherited, e.g. from slurmctld); daemons started from it would inherit that: "+
			"set Options.CleanExec (e.g. burst-agent exec-clean --) or start the bootstrap from a clean process", strings.Join(bad, ", "))
	}
	b.log.Warn("inherited signal state; starting daemons through CleanExec", "signals", bad, "clean_exec", b.o.CleanExec)
	b.needClean = true
	return nil
}

// ParseSigMasks returns the SigBlk and SigIgn masks from /proc/<pid>/status text.
func ParseSigMasks(status string) (blocked, ignored uint64, err error) {
	var haveB, haveI bool
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "SigBlk":
			blocked, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			haveB = err == nil
		case "SigIgn":
			ignored, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			haveI = err == nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("parsing %s: %w", k, err)
		}
	}
	if !haveB || !haveI {
		return 0, 0, errors.New("no SigBlk/SigIgn lines in status")
	}
	return blocked, ignored, nil
}

// ExecClean replaces the current process with argv (argv[0] looked up in
// PATH) running with an empty signal mask and default dispositions for the
// usual termination and user signals. It returns only on error. burst-agent
// wires it as `burst-agent exec-clean -- PROGRAM ARGS...` for Options.CleanExec.
func ExecClean(argv, env []string) error {
	if len(argv) == 0 {
		return errors.New("exec-clean: no program given")
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("exec-clean: %w", err)
	}
	// A handler (rather than an inherited SIG_IGN) is reset to the default by execve.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	runtime.LockOSThread() // the mask is per thread; execve keeps this thread's
	var empty uint64
	const sigSetmask = 2
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetmask, uintptr(unsafe.Pointer(&empty)), 0, 8, 0, 0); e != 0 {
		runtime.UnlockOSThread()
		return fmt.Errorf("exec-clean: clearing signal mask: %w", e)
	}
	err = syscall.Exec(prog, argv, env)
	runtime.UnlockOSThread()
	return fmt.Errorf("exec-clean: executing %s: %w", prog, err)
}
