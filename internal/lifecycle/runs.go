package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// HistoryRecorder receives job starts and ends (the sizer's history of
// recurring jobs; a *sizerclient.Client).
type HistoryRecorder interface {
	JobStarted(ctx context.Context, r sizerapi.JobStart) error
	JobEnded(ctx context.Context, e sizerapi.JobEnd) error
}

// RecordStart is PrologSlurmctld's history step: every job that starts on
// burst nodes (a warm-reused node's job too, which no launch announced)
// enters the history of its recurring job with what it was given. Jobs on
// nodes of no burst class are skipped. It never fails the job.
func RecordStart(ctx context.Context, cfg *config.Config, sl Slurm, rec HistoryRecorder, jobID uint32, nodelist string, now time.Time, log *slog.Logger) {
	log = logOr(log)
	if rec == nil || jobID == 0 {
		return
	}
	nodes, err := hostlist.Expand(nodelist)
	if err != nil || len(nodes) == 0 {
		return
	}
	cl, ok := cfg.ClassOfNode(nodes[0])
	if !ok {
		return
	}
	js, err := sl.Jobs(ctx, jobID)
	if err != nil || len(js) == 0 {
		log.Warn("recording the job's start for learning: looking the job up", "job", jobID, "err", err)
		return
	}
	j := js[0]
	run := sizerapi.JobStart{Job: sizerapi.Job{JobID: fmt.Sprint(jobID), JobName: j.Name, User: j.User, Account: j.Account, Class: cl.Name,
		GPUModel: cl.GPUModel, GPUsPerNode: cl.GPUsPerNode, Nodes: len(nodes), Comment: jobmeta.Combine(j.Comment, j.Extra)},
		NodeList: nodelist, Start: now, Restarts: int(j.RestartCount), Submit: j.SubmitTime}
	if n := j.GPUsPerNode(); n > 0 {
		run.GPUsPerNode = int(n)
	}
	for _, t := range cl.Candidates(catalog.Default()) {
		if run.GPUMemoryMiB == 0 || t.GPUMemoryMiB < run.GPUMemoryMiB {
			run.GPUMemoryMiB = t.GPUMemoryMiB
		}
	}
	if err := rec.JobStarted(ctx, run); err != nil {
		log.Warn("recording the job's start for learning", "job", jobID, "err", err)
		return
	}
	log.Info("job start recorded for learning", "job", jobID, "name", j.Name, "user", j.User, "nodes", len(nodes), "class", cl.Name)
}

// OOMMarkers are what frameworks print when a GPU allocation fails: PyTorch
// ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ..."),
// the CUDA driver and runtime error names, cuBLAS, and JAX/XLA.
var OOMMarkers = []string{"CUDA out of memory", "OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation",
	"CUBLAS_STATUS_ALLOC_FAILED", "RESOURCE_EXHAUSTED: Out of memory"}

// OutputTail is how much of the end of a job's output RecordEnd reads.
const OutputTail = 64 << 10

// RecordEnd is EpilogSlurmctld's history step: how the job ended
// (exitCode2 is SLURM_JOB_EXIT_CODE2, "exit:signal") and whether it ran out
// of GPU memory, from the last OutputTail bytes of its output and error
// files (a failed job only). The files are the user's: they are opened
// without following symbolic links, must be regular files owned by the
// job's user, and only which marker was found leaves this function.
func RecordEnd(ctx context.Context, cfg *config.Config, sl Slurm, rec HistoryRecorder, jobID uint32, nodelist, exitCode2 string, now time.Time, log *slog.Logger) {
	log = logOr(log)
	if rec == nil || jobID == 0 {
		return
	}
	if nodes, err := hostlist.Expand(nodelist); err != nil || len(nodes) == 0 {
		return
	} else if _, ok := cfg.ClassOfNode(nodes[0]); !ok {
		return
	}
	e := sizerapi.JobEnd{JobID: fmt.Sprint(jobID), End: now}
	code, sig, _ := strings.Cut(exitCode2, ":")
	e.ExitCode, _ = strconv.Atoi(strings.TrimSpace(code))
	e.Signal, _ = strconv.Atoi(strings.TrimSpace(sig))
	if e.ExitCode != 0 || e.Signal != 0 {
		if js, err := sl.Jobs(ctx, jobID); err == nil && len(js) > 0 {
			for _, p := range OutputPaths(js[0]) {
				if m, err := findMarker(p, js[0].User); err != nil {
					log.Debug("reading the job's output for out-of-memory markers", "job", jobID, "path", p, "err", err)
				} else if m != "" {
					e.OOM = true
					e.Evidence = fmt.Sprintf("exit code %d; %q in %s", e.ExitCode, m, p)
					break
				}
			}
		}
	}
	if err := rec.JobEnded(ctx, e); err != nil {
		log.Warn("recording the job's end for learning", "job", jobID, "err", err)
		return
	}
	log.Info("job end recorded for learning", "job", jobID, "exit", exitCode2, "oom", e.OOM, "evidence", e.Evidence)
}

// OutputPaths are the files a job's stdout and stderr went to: Slurm's
// filename patterns (%j %J %A %a %u %x %N %%) expanded, relative paths
// under the working directory, the default slurm-%j.out when none was given.
func OutputPaths(j slurm.Job) []string {
	var out []string
	seen := map[string]bool{}
	for _, pat := range []string{j.StdOut, j.StdErr} {
		if pat == "" {
			pat = "slurm-%j.out"
			if j.ArrayJobID != 0 {
				pat = "slurm-%A_%a.out"
			}
		}
		p := expandPattern(pat, j)
		if p == "" || p == "/dev/null" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(j.WorkDir, p)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func expandPattern(pat string, j slurm.Job) string {
	var b strings.Builder
	first := ""
	if ns, err := hostlist.Expand(j.Nodes); err == nil && len(ns) > 0 {
		first = ns[0]
	}
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		if c != '%' || i+1 == len(pat) {
			b.WriteByte(c)
			continue
		}
		// Slurm allows a width between % and the letter (%4j): skip digits
		k := i + 1
		for k < len(pat) && pat[k] >= '0' && pat[k] <= '9' {
			k++
		}
		if k == len(pat) {
			b.WriteString(pat[i:])
			break
		}
		switch pat[k] {
		case 'j', 'J':
			fmt.Fprint(&b, j.ID)
		case 'A':
			if j.ArrayJobID != 0 {
				fmt.Fprint(&b, j.ArrayJobID)
			} else {
				fmt.Fprint(&b, j.ID)
			}
		case 'a':
			b.WriteString("0")
		case 'u':
			b.WriteString(j.User)
		case 'x':
			b.WriteString(j.Name)
		case 'N', 'n':
			b.WriteString(first)
		case '%':
			b.WriteByte('%')
		default:
			return "" // a pattern burst does not know: do not guess a path
		}
		i = k
	}
	return b.String()
}

// findMarker returns the first OOMMarker in the tail of path.
func findMarker(path, owner string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		u, err := user.Lookup(owner)
		if err != nil {
			return "", fmt.Errorf("looking up the job's user %q: %w", owner, err)
		}
		if fmt.Sprint(st.Uid) != u.Uid {
			return "", fmt.Errorf("%s is owned by uid %d, not the job's user %s", path, st.Uid, owner)
		}
	}
	off := max(fi.Size()-OutputTail, 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, OutputTail))
	if err != nil {
		return "", err
	}
	for _, m := range OOMMarkers {
		if bytes.Contains(buf, []byte(m)) {
			return m, nil
		}
	}
	return "", nil
}
