// Package slurm talks to Slurm for burst: a narrow Client interface with an
// implementation over the Slurm command-line tools (scontrol, squeue, sinfo,
// scancel) of every supported release (22.05 to 26.05, see dialectFor), and
// one pure parser per format burst reads: job JSON, node JSON, 22.05's
// scontrol node lines, squeue job states, SLURM_RESUME_FILE and GRES.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client is what burst needs from Slurm.
type Client interface {
	// Ping succeeds when the primary slurmctld answers.
	Ping(ctx context.Context) error
	// Jobs returns the given jobs, in any state (all jobs slurmctld still
	// knows when ids is empty). Unknown ids are left out, not an error.
	Jobs(ctx context.Context, ids ...uint32) ([]Job, error)
	// JobStates returns the ID, state, reason and nodes of the jobs f
	// selects, in one small call on every release: for polls, and to pick
	// the jobs worth a Jobs call. Unknown ids are left out.
	JobStates(ctx context.Context, f JobFilter) ([]JobState, error)
	// Nodes returns the named nodes (plain names; all nodes when names is
	// empty). Unknown names are left out, not an error.
	Nodes(ctx context.Context, names ...string) ([]Node, error)
	// UpdateNodes applies updates, one scontrol call per distinct update.
	UpdateNodes(ctx context.Context, updates ...NodeUpdate) error
	// Requeue puts a job back into the queue (scontrol requeue). Slurm then
	// holds it ~120 s (BeginTime); StartNow clears that.
	Requeue(ctx context.Context, jobID uint32) error
	// StartNow makes a pending job eligible now (scontrol update jobid=N
	// starttime=now), e.g. after Requeue.
	StartNow(ctx context.Context, jobID uint32) error
	// Hold holds a pending job (priority 0, Reason=JobHeldAdmin) and, when
	// reason is not empty, records it as the job's AdminComment.
	Hold(ctx context.Context, jobID uint32, reason string) error
	// Release releases a held job (scontrol release).
	Release(ctx context.Context, jobID uint32) error
	// RequeueHold requeues a job that was given nodes and holds it
	// (scontrol requeuehold), recording reason as its AdminComment.
	RequeueHold(ctx context.Context, jobID uint32, reason string) error
	// SetAdminComment replaces a job's AdminComment (AdminCommenter).
	SetAdminComment(ctx context.Context, jobID uint32, text string) error
	// Signal sends sig (e.g. "USR1") to a job's steps, or only to its
	// batch shell when batchOnly (scancel --signal=SIG [--batch]).
	Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error
}

// NodeUpdate is one `scontrol update nodename=...` request. Empty fields are
// left unchanged; at least one must be set.
type NodeUpdate struct {
	// Names are node names or hostlist expressions ("gpu-[1-3]").
	Names []string
	// State: e.g. POWER_DOWN_ASAP, POWER_DOWN_FORCE, POWER_UP, DOWN, DRAIN,
	// RESUME, IDLE, UNDRAIN.
	State string
	// Reason is required by Slurm with DOWN and DRAIN.
	Reason string
	// Addr and Hostname set NodeAddr/NodeHostName; only with one name.
	Addr, Hostname string
	Comment        string
	Extra          string
}

func (u NodeUpdate) key() string {
	return strings.Join([]string{u.State, u.Reason, u.Addr, u.Hostname, u.Comment, u.Extra}, "\x00")
}

// CommandError is a failed Slurm command.
type CommandError struct {
	Path   string
	Args   []string
	Stderr string
	Err    error
}

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = "(no stderr)"
	}
	return fmt.Sprintf("running %s %s: %v: %s", e.Path, strings.Join(e.Args, " "), e.Err, msg)
}

func (e *CommandError) Unwrap() []error {
	errs := []error{e.Err}
	if c := Classify(0, e.Stderr); c != nil {
		errs = append(errs, c)
	}
	return errs
}

// ScontrolOptions configure NewScontrol.
type ScontrolOptions struct {
	// BinDir holds scontrol, squeue, sinfo, scancel; default /usr/bin.
	BinDir string
	// Conf is passed as SLURM_CONF; default: $SLURM_CONF if set (else Slurm's
	// built-in default).
	Conf string
	// Timeout bounds each command; default 30 s.
	Timeout time.Duration
	// Logger logs each command at debug level; default slog.Default().
	Logger *slog.Logger
	// Version skips the detection of the Slurm release (`scontrol
	// --version`, once per process) and uses this one.
	Version Version
	// Observe, when set, is called after each command (benchmarks count
	// calls and bytes with it).
	Observe func(Call)
}

// Call is one Slurm command a Scontrol ran.
type Call struct {
	Name   string // scontrol, squeue, sinfo, scancel
	Args   []string
	Stdout int // bytes
	Took   time.Duration
	Err    error
}

// Scontrol implements Client with the Slurm command-line tools. Commands are
// run by absolute path, never through a shell, with an empty signal mask
// (slurmctld runs burst's hooks with signals blocked) and a timeout each.
type Scontrol struct {
	bin     string
	conf    string
	timeout time.Duration
	log     *slog.Logger
	version Version
	observe func(Call)
}

var _ Client = (*Scontrol)(nil)

// NewScontrol returns a Client over the Slurm command-line tools.
func NewScontrol(opts ScontrolOptions) *Scontrol {
	s := &Scontrol{bin: opts.BinDir, conf: opts.Conf, timeout: opts.Timeout, log: opts.Logger,
		version: opts.Version, observe: opts.Observe}
	if s.bin == "" {
		s.bin = "/usr/bin"
	}
	if s.conf == "" {
		s.conf = os.Getenv("SLURM_CONF")
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

func (s *Scontrol) path(name string) string { return filepath.Join(s.bin, name) }

// run executes BinDir/name args and returns stdout.
func (s *Scontrol) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return s.runHead(ctx, name, 0, args...)
}

// runHead is run reading at most maxLines lines of stdout (all with 0):
// past them burst stops reading and closes the pipe, so a long answer costs
// what was read, and the command's exit (a broken pipe) is not an error.
func (s *Scontrol) runHead(ctx context.Context, name string, maxLines int, args ...string) ([]byte, error) {
	path := s.path(name)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = 2 * time.Second
	env := make([]string, 0, len(os.Environ())+1)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SLURM_CONF=") {
			env = append(env, e)
		}
	}
	if s.conf != "" {
		env = append(env, "SLURM_CONF="+s.conf)
	}
	cmd.Env = env
	stdout := &headWriter{max: maxLines}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	t0 := time.Now()
	err := StartUnblocked(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	took := time.Since(t0)
	if stdout.full && ctx.Err() == nil {
		err = nil // burst stopped reading: squeue's broken pipe is burst's doing
	}
	s.log.Debug("slurm command", "cmd", path, "args", args, "stdout_bytes", stdout.read, "stopped_after_lines", maxLines, "took", took, "err", err)
	if s.observe != nil {
		s.observe(Call{Name: name, Args: args, Stdout: stdout.read, Took: took, Err: err})
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timeout %s)", ctx.Err(), s.timeout)
		}
		return stdout.Bytes(), &CommandError{Path: path, Args: args, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// headWriter keeps what is written up to its max'th newline (everything
// with max 0) and then fails every write, which makes os/exec stop copying
// and close the command's stdout. read counts every byte it was handed. (It
// must not offer ReadFrom, or io.Copy would bypass Write.)
type headWriter struct {
	buf              bytes.Buffer
	max, lines, read int
	full             bool
}

var errHeadFull = errors.New("read the lines wanted")

func (w *headWriter) Bytes() []byte { return w.buf.Bytes() }

func (w *headWriter) Write(p []byte) (int, error) {
	w.read += len(p)
	if w.full {
		return 0, errHeadFull
	}
	if w.max <= 0 {
		return w.buf.Write(p)
	}
	for i, c := range p {
		if c == '\n' {
			if w.lines++; w.lines == w.max {
				w.buf.Write(p[:i+1])
				w.full = true
				return 0, errHeadFull
			}
		}
	}
	return w.buf.Write(p)
}

// Ping implements Client.
func (s *Scontrol) Ping(ctx context.Context) error {
	out, err := s.run(ctx, "scontrol", "ping")
	if err != nil {
		return fmt.Errorf("pinging slurmctld: %w", err)
	}
	if !strings.Contains(string(out), "is UP") {
		return fmt.Errorf("pinging slurmctld: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// UpdateNodes implements Client: one scontrol call per merged update (see
// MergeNodeUpdates), in order, stopping at the first error.
func (s *Scontrol) UpdateNodes(ctx context.Context, updates ...NodeUpdate) error {
	merged, err := MergeNodeUpdates(updates)
	if err != nil {
		return err
	}
	for _, u := range merged {
		args := []string{"update", "nodename=" + strings.Join(u.Names, ",")}
		for _, f := range []struct{ k, v string }{{"state", u.State}, {"reason", u.Reason}, {"nodeaddr", u.Addr},
			{"nodehostname", u.Hostname}, {"comment", u.Comment}, {"extra", u.Extra}} {
			if f.v != "" {
				args = append(args, f.k+"="+f.v)
			}
		}
		if _, err := s.run(ctx, "scontrol", args...); err != nil {
			return fmt.Errorf("updating nodes %s: %w", strings.Join(u.Names, ","), err)
		}
	}
	return nil
}

// MergeNodeUpdates validates updates and merges those that differ only in
// Names (never those setting Addr or Hostname, which are per node), in the
// order of first appearance: what each backend's UpdateNodes applies.
func MergeNodeUpdates(updates []NodeUpdate) ([]NodeUpdate, error) {
	var order []string
	merged := map[string]*NodeUpdate{}
	for i, u := range updates {
		if err := u.validate(); err != nil {
			return nil, fmt.Errorf("updating nodes: update %d: %w", i, err)
		}
		k := u.key()
		if m, ok := merged[k]; ok && u.Addr == "" && u.Hostname == "" {
			m.Names = append(m.Names, u.Names...)
			continue
		}
		if _, ok := merged[k]; ok {
			k = fmt.Sprintf("%s\x00#%d", k, i)
		}
		c := u
		c.Names = slices.Clone(u.Names)
		merged[k] = &c
		order = append(order, k)
	}
	out := make([]NodeUpdate, 0, len(order))
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out, nil
}

func (u NodeUpdate) validate() error {
	if len(u.Names) == 0 {
		return errors.New("no node names")
	}
	for _, n := range u.Names {
		if n == "" || strings.ContainsAny(n, " \t\r\n\x00=\"'") {
			return fmt.Errorf("node name %q: empty or has a space, quote, '=' or control character", n)
		}
	}
	if u.State == "" && u.Reason == "" && u.Addr == "" && u.Hostname == "" && u.Comment == "" && u.Extra == "" {
		return fmt.Errorf("nothing to update for %s", strings.Join(u.Names, ","))
	}
	if (u.Addr != "" || u.Hostname != "") && len(u.Names) != 1 {
		return fmt.Errorf("Addr/Hostname set for %d name entries; give exactly one node per update", len(u.Names))
	}
	for _, f := range []struct{ k, v string }{{"State", u.State}, {"Reason", u.Reason}, {"Addr", u.Addr},
		{"Hostname", u.Hostname}, {"Comment", u.Comment}, {"Extra", u.Extra}} {
		if strings.ContainsAny(f.v, "\r\n\x00") {
			return fmt.Errorf("%s %q has a newline or NUL", f.k, f.v)
		}
	}
	if strings.ContainsAny(u.State+u.Addr+u.Hostname, " \t") {
		return fmt.Errorf("State/Addr/Hostname must not contain spaces")
	}
	return nil
}

func jobArg(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

// Requeue implements Client.
func (s *Scontrol) Requeue(ctx context.Context, jobID uint32) error {
	if _, err := s.run(ctx, "scontrol", "requeue", jobArg(jobID)); err != nil {
		return fmt.Errorf("requeueing job %d: %w", jobID, err)
	}
	return nil
}

// StartNow implements Client.
func (s *Scontrol) StartNow(ctx context.Context, jobID uint32) error {
	if _, err := s.run(ctx, "scontrol", "update", "jobid="+jobArg(jobID), "starttime=now"); err != nil {
		return fmt.Errorf("making job %d eligible now: %w", jobID, err)
	}
	return nil
}

// Hold implements Client.
func (s *Scontrol) Hold(ctx context.Context, jobID uint32, reason string) error {
	if strings.ContainsAny(reason, "\r\n\x00") {
		return fmt.Errorf("holding job %d: reason %q has a newline or NUL", jobID, reason)
	}
	if _, err := s.run(ctx, "scontrol", "hold", jobArg(jobID)); err != nil {
		return fmt.Errorf("holding job %d: %w", jobID, err)
	}
	if reason != "" {
		if _, err := s.run(ctx, "scontrol", "update", "jobid="+jobArg(jobID), "admincomment="+reason); err != nil {
			return fmt.Errorf("recording hold reason of job %d: %w", jobID, err)
		}
	}
	return nil
}

// RequeueHold requeues a job that was given nodes and holds it
// (scontrol requeuehold), recording the reason as its AdminComment.
func (s *Scontrol) RequeueHold(ctx context.Context, jobID uint32, reason string) error {
	if strings.ContainsAny(reason, "\r\n\x00") {
		return fmt.Errorf("requeueing job %d held: reason %q has a newline or NUL", jobID, reason)
	}
	if _, err := s.run(ctx, "scontrol", "requeuehold", jobArg(jobID)); err != nil {
		return fmt.Errorf("requeueing job %d held: %w", jobID, err)
	}
	if reason != "" {
		if _, err := s.run(ctx, "scontrol", "update", "jobid="+jobArg(jobID), "admincomment="+reason); err != nil {
			return fmt.Errorf("recording hold reason of job %d: %w", jobID, err)
		}
	}
	return nil
}

// Release implements Client.
func (s *Scontrol) Release(ctx context.Context, jobID uint32) error {
	if _, err := s.run(ctx, "scontrol", "release", jobArg(jobID)); err != nil {
		return fmt.Errorf("releasing job %d: %w", jobID, err)
	}
	return nil
}

// Signal implements Client.
func (s *Scontrol) Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error {
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if sig == "" || len(sig) > 8 || strings.IndexFunc(sig, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return fmt.Errorf("signalling job %d: signal %q: want a name like USR1 or TERM, or a number", jobID, sig)
	}
	args := []string{"--signal=" + sig}
	if batchOnly {
		args = append(args, "--batch")
	}
	args = append(args, jobArg(jobID))
	if _, err := s.run(ctx, "scancel", args...); err != nil {
		return fmt.Errorf("signalling job %d with %s: %w", jobID, sig, err)
	}
	return nil
}
