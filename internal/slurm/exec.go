package slurm

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"
)

// StartUnblocked starts cmd like cmd.Start, but guarantees the child begins
// with an empty signal mask.
//
// Why: slurmctld runs ResumeProgram, SuspendProgram and Prolog/EpilogSlurmctld
// with SIGTERM (and others) blocked. Go records the mask a process was started
// with and, for signals it does not itself need unblocked (SIGUSR1, SIGUSR2,
// SIGALRM, ...), hands the mask of the forking thread on to every child it
// starts. A slurmd or job step started that way ignores those signals.
// os/exec has no SysProcAttr field for the mask, so StartUnblocked forks from a
// dedicated, locked OS thread whose mask it first clears: the runtime saves
// that thread's mask before fork and restores it in the child before exec.
// The thread is discarded afterwards (the goroutine exits while locked).
//
// Signals ignored (SIG_IGN) by this process stay ignored in the child; that is
// a property of exec, not of the mask. Do not combine with SysProcAttr.Pdeathsig:
// the death signal would fire when the discarded thread exits.
func StartUnblocked(cmd *exec.Cmd) error {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Pdeathsig != 0 {
		return fmt.Errorf("starting %s: Pdeathsig cannot be used with StartUnblocked (it fires when the starting thread exits)", cmd.Path)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, so the cleared
		// mask does not leak into the scheduler's thread pool.
		runtime.LockOSThread()
		if err := setThreadSigmask(0); err != nil {
			errc <- fmt.Errorf("starting %s: clearing signal mask: %w", cmd.Path, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// setThreadSigmask sets the calling thread's signal mask (rt_sigprocmask,
// SIG_SETMASK) to the 64-bit set mask.
func setThreadSigmask(mask uint64) error {
	const sigSetMask = 2 // SIG_SETMASK
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetMask,
		uintptr(unsafe.Pointer(&mask)), 0, 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
