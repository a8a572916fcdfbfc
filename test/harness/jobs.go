package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Job is a job as Slurm recorded it: its id and the uid it runs as (from
// slurmctld, never from what the harness meant to submit).
type Job struct {
	ID  string
	UID int
	// User is the name Slurm shows (may be empty for an unknown uid).
	User string
	// AsRoot: submitted through SbatchAsRoot, a test that is about root.
	AsRoot bool
}

// JobCompLog is the job completion log (jobcomp/filetxt): one line per
// job end or requeue, with the job's owner.
func (c *Cluster) JobCompLog() string { return filepath.Join(c.dir, "log", "jobcomp.log") }

// UserCommand is Command run as u (an ordinary user, not root): root enters
// the cluster's namespaces (a Debian root's, for 24.11 and later), then
// setpriv drops to u, its primary group only, before exec'ing name. This
// is how a site's users run sbatch, srun and salloc.
func (c *Cluster) UserCommand(ctx context.Context, u User, name string, args ...string) *exec.Cmd {
	if !filepath.IsAbs(name) {
		name = filepath.Join(c.opts.BinDir, name)
	}
	argv := append([]string{fmt.Sprintf("--reuid=%d", u.UID), fmt.Sprintf("--regid=%d", u.GID), "--clear-groups", "--", name}, args...)
	return c.Command(ctx, "/usr/bin/setpriv", argv...)
}

// Sbatch submits a batch job (sbatch --parsable ARGS) as the cluster's
// ordinary user (User) from work/, and returns its id.
func (c *Cluster) Sbatch(ctx context.Context, args ...string) (string, error) {
	return c.submit(ctx, &c.user, args)
}

// SbatchAs is Sbatch as user u (made by EnsureUser, added by AddUser).
func (c *Cluster) SbatchAs(ctx context.Context, u User, args ...string) (string, error) {
	if u.UID == 0 {
		return "", fmt.Errorf("sbatch as %s: uid 0; use SbatchAsRoot in a test that is about root", u.Name)
	}
	return c.submit(ctx, &u, args)
}

// SbatchAsRoot is Sbatch as root, for the tests that are about root's
// jobs; CheckJobOwners allows exactly these.
func (c *Cluster) SbatchAsRoot(ctx context.Context, args ...string) (string, error) {
	return c.submit(ctx, nil, args)
}

func (c *Cluster) submit(ctx context.Context, u *User, args []string) (string, error) {
	args = append([]string{"--parsable"}, args...)
	cmd := c.Command(ctx, "sbatch", args...)
	who := "root"
	if u != nil {
		cmd, who = c.UserCommand(ctx, *u, "sbatch", args...), u.Name
	}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		msg := ""
		if errors.As(err, &ee) {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("sbatch as %s %s: %w: %s", who, strings.Join(args, " "), err, msg)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if id == "" {
		return "", fmt.Errorf("sbatch as %s %s: no job id in output %q", who, strings.Join(args, " "), out)
	}
	// the owner as Slurm has it, not as meant
	show, err := c.Run(ctx, "squeue", "-h", "-t", "all", "-j", id, "-o", squeueOwners)
	if err != nil {
		return "", fmt.Errorf("reading the owner of job %s: %w", id, err)
	}
	jobs := ParseSqueueOwners(show)
	// an array job's pending tasks show as ID_[0-3]
	i := slices.IndexFunc(jobs, func(j Job) bool { return j.ID == id || strings.HasPrefix(j.ID, id+"_") })
	if i < 0 {
		return "", fmt.Errorf("reading the owner of job %s: no JobId=%s with a UserId in %q", id, id, show)
	}
	j := jobs[i]
	j.ID, j.AsRoot = id, u == nil
	if u != nil && j.UID != u.UID {
		return "", fmt.Errorf("job %s submitted as %s (uid %d) runs as uid %d", id, u.Name, u.UID, j.UID)
	}
	c.mu.Lock()
	c.jobs = append(c.jobs, j)
	c.mu.Unlock()
	return id, nil
}

// Submitted is every job Sbatch* submitted, with Slurm's owner.
func (c *Cluster) Submitted() []Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.jobs)
}

// squeueOwners is the squeue format ParseSqueueOwners reads: job id, uid,
// user name.
const squeueOwners = "%i %U %u"

// JobOwners is every job the cluster has seen, with its owner from Slurm:
// those slurmctld still holds (squeue -t all) and those that ended or
// were requeued (the job completion log), however they were submitted
// (Sbatch, srun, salloc, a test's own sbatch), and Sbatch's records. What
// it could not read (slurmctld stopped by a test) is the error; the jobs
// are those it could.
func (c *Cluster) JobOwners(ctx context.Context) ([]Job, error) {
	var errs []error
	jobs := c.Submitted()
	b, err := os.ReadFile(c.JobCompLog())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("reading the job completion log: %w", err))
	}
	jobs = append(jobs, ParseJobCompOwners(string(b))...)
	if out, err := c.Run(ctx, "squeue", "-h", "-t", "all", "-o", squeueOwners); err != nil {
		errs = append(errs, fmt.Errorf("listing the cluster's jobs: %w", err))
	} else {
		jobs = append(jobs, ParseSqueueOwners(out)...)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return strings.Compare(a.ID, b.ID) })
	jobs = slices.CompactFunc(jobs, func(a, b Job) bool { return a.ID == b.ID && a.UID == b.UID })
	return jobs, errors.Join(errs...)
}

// CheckJobOwners fails when a job of the cluster ran as root (uid 0)
// without SbatchAsRoot having submitted it: jobs are an ordinary user's,
// as at a site. It returns how many jobs it checked and, as partial, what
// it could not read (e.g. slurmctld stopped: then only the completion log
// and Sbatch's records were checked).
func (c *Cluster) CheckJobOwners(ctx context.Context) (checked int, partial, err error) {
	jobs, partial := c.JobOwners(ctx)
	allowed := map[string]bool{}
	for _, j := range c.Submitted() {
		if j.AsRoot {
			allowed[j.ID] = true
		}
	}
	var bad []string
	for _, j := range jobs {
		if j.UID == 0 && !allowed[j.ID] {
			bad = append(bad, j.ID)
		}
	}
	if len(bad) > 0 {
		return len(jobs), partial, fmt.Errorf("jobs %s ran as root (uid 0): submit jobs with Sbatch or UserCommand (the cluster's user %s), or SbatchAsRoot in a test about root",
			strings.Join(bad, ", "), c.user.Name)
	}
	return len(jobs), partial, nil
}

// ParseSqueueOwners reads `squeue -h -o "%i %U %u"`: job id, uid, name.
// Lines that are not that are ignored.
func ParseSqueueOwners(text string) []Job {
	var jobs []Job
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		uid, err := strconv.Atoi(f[1])
		if err != nil || uid < 0 {
			continue
		}
		j := Job{ID: f[0], UID: uid}
		if len(f) > 2 {
			j.User = f[2]
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// ParseJobCompOwners reads the JobId and UserId=name(uid) of each line of
// a jobcomp/filetxt log; lines without both are ignored. The first
// occurrence of each key counts: both come before the job's name, which
// is the user's text.
func ParseJobCompOwners(text string) []Job {
	var jobs []Job
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var id, owner string
		for _, f := range strings.Fields(sc.Text()) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			if k == "JobId" && id == "" {
				id = v
			}
			if k == "UserId" && owner == "" {
				owner = v
			}
			if id != "" && owner != "" {
				break
			}
		}
		if id == "" || owner == "" || !strings.HasSuffix(owner, ")") {
			continue
		}
		open := strings.LastIndexByte(owner, '(')
		if open < 0 {
			continue
		}
		uid, err := strconv.Atoi(owner[open+1 : len(owner)-1])
		if err != nil || uid < 0 {
			continue
		}
		jobs = append(jobs, Job{ID: id, UID: uid, User: owner[:open]})
	}
	return jobs
}
