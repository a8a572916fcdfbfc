// Package attrib maps process ids to the Slurm jobs they belong to, from
// /proc/PID/cgroup: Slurm's cgroup plugins (proctrack/cgroup, task/cgroup)
// put every task under a job_N directory that only slurmstepd (root) can
// move processes into. SLURM_JOB_ID in /proc/PID/environ is a claim any
// user can make (`env SLURM_JOB_ID=42 ./burn`), so it is read only when a
// site without the cgroup plugins asks for it (Resolver.AllowEnviron).
package attrib

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoJob means the process does not belong to a Slurm job.
var ErrNoJob = errors.New("process is not part of a Slurm job")

// ParseCgroup returns the Slurm job id in a /proc/PID/cgroup file (v1 or
// v2), e.g. "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"
// or "5:memory:/slurm/uid_1000/job_42/step_batch/task_0". It returns
// ErrNoJob when no line names a job and an error for malformed content.
func ParseCgroup(data []byte) (uint32, error) {
	if len(data) == 0 {
		return 0, fmt.Errorf("parsing cgroup file: empty: %w", ErrNoJob)
	}
	var found uint32
	for n, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return 0, fmt.Errorf("parsing cgroup file line %d %q: want hierarchy:controllers:path", n+1, line)
		}
		if _, err := strconv.ParseUint(parts[0], 10, 32); err != nil {
			return 0, fmt.Errorf("parsing cgroup file line %d %q: hierarchy id %q is not a number", n+1, line, parts[0])
		}
		if !strings.HasPrefix(parts[2], "/") {
			return 0, fmt.Errorf("parsing cgroup file line %d %q: path %q is not absolute", n+1, line, parts[2])
		}
		for _, el := range strings.Split(parts[2], "/") {
			num, ok := strings.CutPrefix(el, "job_")
			if !ok {
				continue
			}
			id, err := parseJobID(num)
			if err != nil {
				return 0, fmt.Errorf("parsing cgroup file line %d %q: %w", n+1, line, err)
			}
			if found != 0 && found != id {
				return 0, fmt.Errorf("parsing cgroup file: lines name two jobs, %d and %d", found, id)
			}
			found = id
		}
	}
	if found == 0 {
		return 0, ErrNoJob
	}
	return found, nil
}

// ParseEnviron returns SLURM_JOB_ID from a NUL-separated /proc/PID/environ.
func ParseEnviron(data []byte) (uint32, error) {
	for _, kv := range bytes.Split(data, []byte{0}) {
		v, ok := bytes.CutPrefix(kv, []byte("SLURM_JOB_ID="))
		if !ok {
			continue
		}
		id, err := parseJobID(string(v))
		if err != nil {
			return 0, fmt.Errorf("parsing environ: SLURM_JOB_ID: %w", err)
		}
		return id, nil
	}
	return 0, ErrNoJob
}

func parseJobID(s string) (uint32, error) {
	id64, err := strconv.ParseUint(s, 10, 32) // Slurm job ids are uint32
	id := uint32(id64)
	if err != nil || id == 0 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("job id %q is not a positive decimal number", s)
	}
	return id, nil
}

// Resolver reads /proc and caches pid -> job.
type Resolver struct {
	// ProcRoot is the proc mount; default /proc.
	ProcRoot string
	// AllowEnviron attributes a process in no job cgroup to the
	// SLURM_JOB_ID of its environment (burst-agent --attribute-environ, for
	// sites without Slurm's cgroup plugins). Off: such a process is no
	// job's, whatever its environment claims.
	AllowEnviron bool
	cache        map[int]uint32
}

// JobOf returns the job of pid from its cgroup (and, with AllowEnviron,
// from its environment when its cgroup names none). ErrNoJob when none is
// named.
func (r *Resolver) JobOf(pid int) (uint32, error) {
	if id, ok := r.cache[pid]; ok {
		return id, nil
	}
	root := r.ProcRoot
	if root == "" {
		root = "/proc"
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	cg, cgErr := os.ReadFile(filepath.Join(dir, "cgroup"))
	if cgErr == nil {
		id, err := ParseCgroup(cg)
		if err == nil {
			r.remember(pid, id)
			return id, nil
		}
		if !errors.Is(err, ErrNoJob) {
			return 0, fmt.Errorf("attributing pid %d: %w", pid, err)
		}
	}
	if !r.AllowEnviron {
		if cgErr != nil {
			return 0, fmt.Errorf("attributing pid %d: %w", pid, cgErr)
		}
		return 0, fmt.Errorf("attributing pid %d: in no Slurm job cgroup: %w", pid, ErrNoJob)
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		if cgErr != nil {
			return 0, fmt.Errorf("attributing pid %d: %w", pid, cgErr)
		}
		return 0, fmt.Errorf("attributing pid %d: reading environ (the agent must run as root): %w", pid, err)
	}
	id, err := ParseEnviron(env)
	if err != nil {
		return 0, fmt.Errorf("attributing pid %d: %w", pid, err)
	}
	r.remember(pid, id)
	return id, nil
}

func (r *Resolver) remember(pid int, id uint32) {
	if r.cache == nil {
		r.cache = map[int]uint32{}
	}
	r.cache[pid] = id
}

// Forget drops cached entries for pids not in live, so a reused pid is
// looked up again. Call it once per sampling tick with the pids seen.
func (r *Resolver) Forget(live map[int]bool) {
	for pid := range r.cache {
		if !live[pid] {
			delete(r.cache, pid)
		}
	}
}
