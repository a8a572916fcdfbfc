package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"
)

// MaxResumeFileSize caps SLURM_RESUME_FILE. Slurm writes one small object
// per job being resumed; 16 MiB is tens of thousands of jobs.
const MaxResumeFileSize = 16 << 20

// maxHostlistLen caps any single hostlist string in the resume file.
const maxHostlistLen = 1 << 20

// ResumeFile is the JSON document slurmctld hands ResumeProgram through
// SLURM_RESUME_FILE.
//
// Slurm 22.05: {"jobs":[{"job_id":2,"nodes":"gpu-[1-2]"}],"all_nodes":"gpu-[1-3]"}
// Slurm 23.02+: {"all_nodes_resume":"...","jobs":[{"job_id":..,"nodes_alloc":"..",
// "nodes_resume":"..","features":"..","partition":"..","reservation":"..",
// "extra":"..","oversubscribe":".."}]}
// Slurm 26.05 adds "exclusive" and "priority" to each job.
// Unknown fields are ignored; every shape fills the same struct (fixtures
// from the real daemons: testdata/<release>/resume-*.json).
type ResumeFile struct {
	// AllNodes is every node being resumed (22.05 all_nodes, 23.02+
	// all_nodes_resume), as a hostlist expression.
	AllNodes string
	// Jobs are the jobs the resume is for; empty for a manual
	// `scontrol update nodename=X state=POWER_UP`.
	Jobs []ResumeJob
}

// ResumeJob is one job of a resume request.
type ResumeJob struct {
	JobID uint32
	// Nodes are the job's nodes being resumed now (23.02+ nodes_resume;
	// 22.05 nodes).
	Nodes string
	// NodesAlloc are all nodes allocated to the job, also those already up
	// (23.02+ nodes_alloc; 22.05: same as Nodes).
	NodesAlloc    string
	Features      string // 23.02+: the job's --constraint
	Partition     string // 23.02+
	Reservation   string // 23.02+
	Extra         string // 23.02+: --extra
	Oversubscribe string // 23.02+: OK, NO, YES, USER, MCS
	Exclusive     string // 26.05+: NO, YES, USER, MCS, TOPO
	Priority      uint32 // 26.05+
}

type rawResumeFile struct {
	AllNodes       *string          `json:"all_nodes"`
	AllNodesResume *string          `json:"all_nodes_resume"`
	Jobs           *[]rawResumeJobs `json:"jobs"`
}

type rawResumeJobs struct {
	JobID         *uint64 `json:"job_id"`
	Nodes         *string `json:"nodes"`
	NodesResume   *string `json:"nodes_resume"`
	NodesAlloc    *string `json:"nodes_alloc"`
	Features      *string `json:"features"`
	Partition     *string `json:"partition"`
	Reservation   *string `json:"reservation"`
	Extra         *string `json:"extra"`
	Oversubscribe *string `json:"oversubscribe"`
	Exclusive     *string `json:"exclusive"`
	Priority      num     `json:"priority"`
}

// ReadResumeFile reads and parses the file at path (normally
// os.Getenv("SLURM_RESUME_FILE")), refusing files over MaxResumeFileSize.
// It also returns what it read (at most MaxResumeFileSize+1 bytes), even
// when parsing failed, so the caller can keep a copy.
func ReadResumeFile(path string) (ResumeFile, []byte, error) {
	if path == "" {
		return ResumeFile{}, nil, errors.New("reading resume file: SLURM_RESUME_FILE is not set (is this program run by slurmctld as ResumeProgram?)")
	}
	f, err := os.Open(path)
	if err != nil {
		return ResumeFile{}, nil, fmt.Errorf("reading resume file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxResumeFileSize+1))
	if err != nil {
		return ResumeFile{}, nil, fmt.Errorf("reading resume file %s: %w", path, err)
	}
	rf, err := ParseResumeFile(b)
	if err != nil {
		return ResumeFile{}, b, fmt.Errorf("%w (file %s)", err, path)
	}
	return rf, b, nil
}

// ParseResumeFile parses a SLURM_RESUME_FILE document (see ResumeFile).
// It rejects documents over MaxResumeFileSize, anything but one JSON object,
// wrong field types, jobs without a positive job_id or without nodes,
// duplicate jobs, and hostlists with control characters or over 1 MiB.
func ParseResumeFile(b []byte) (ResumeFile, error) {
	var rf ResumeFile
	if len(b) > MaxResumeFileSize {
		return rf, fmt.Errorf("parsing resume file: %d bytes, more than the %d allowed", len(b), MaxResumeFileSize)
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return rf, errors.New(`parsing resume file: not a JSON object; want {"jobs":[...],"all_nodes":"..."}`)
	}
	if !utf8.Valid(trimmed) {
		return rf, errors.New("parsing resume file: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var raw rawResumeFile
	if err := dec.Decode(&raw); err != nil {
		return rf, fmt.Errorf("parsing resume file: %w", describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return rf, errors.New("parsing resume file: data after the JSON object")
	}
	switch {
	case raw.AllNodesResume != nil:
		rf.AllNodes = *raw.AllNodesResume
	case raw.AllNodes != nil:
		rf.AllNodes = *raw.AllNodes
	}
	if rf.AllNodes == "" {
		return rf, errors.New("parsing resume file: missing or empty all_nodes (22.05) / all_nodes_resume (23.02+)")
	}
	if err := checkHostlist("all_nodes", rf.AllNodes); err != nil {
		return rf, err
	}
	if raw.Jobs == nil {
		return rf, errors.New(`parsing resume file: missing "jobs" array`)
	}
	seen := map[uint32]bool{}
	for i, rj := range *raw.Jobs {
		j, err := resumeJob(i, rj, seen)
		if err != nil {
			return rf, err
		}
		rf.Jobs = append(rf.Jobs, j)
	}
	return rf, nil
}

// resumeJob checks and converts the resume file's job i (seen: the job ids
// before it).
func resumeJob(i int, rj rawResumeJobs, seen map[uint32]bool) (ResumeJob, error) {
	where := fmt.Sprintf("jobs[%d]", i)
	if rj.JobID == nil {
		return ResumeJob{}, fmt.Errorf("parsing resume file: %s: missing job_id", where)
	}
	if *rj.JobID == 0 || *rj.JobID > math.MaxUint32 {
		return ResumeJob{}, fmt.Errorf("parsing resume file: %s: job_id %d out of range 1..%d", where, *rj.JobID, uint32(math.MaxUint32))
	}
	j := ResumeJob{JobID: uint32(*rj.JobID)}
	where = fmt.Sprintf("jobs[%d] (job %d)", i, j.JobID)
	if seen[j.JobID] {
		return ResumeJob{}, fmt.Errorf("parsing resume file: %s: job listed twice", where)
	}
	seen[j.JobID] = true
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	j.Nodes = str(rj.NodesResume)
	if j.Nodes == "" {
		j.Nodes = str(rj.Nodes)
	}
	j.NodesAlloc = str(rj.NodesAlloc)
	if j.NodesAlloc == "" {
		j.NodesAlloc = str(rj.Nodes)
	}
	if j.NodesAlloc == "" {
		j.NodesAlloc = j.Nodes
	}
	if j.Nodes == "" {
		return ResumeJob{}, fmt.Errorf("parsing resume file: %s: missing nodes (22.05) / nodes_resume (23.02+)", where)
	}
	for _, f := range []struct{ name, v string }{{"nodes", j.Nodes}, {"nodes_alloc", j.NodesAlloc}} {
		if err := checkHostlist(where+"."+f.name, f.v); err != nil {
			return ResumeJob{}, err
		}
	}
	j.Features, j.Partition, j.Reservation = str(rj.Features), str(rj.Partition), str(rj.Reservation)
	j.Extra, j.Oversubscribe, j.Exclusive = str(rj.Extra), str(rj.Oversubscribe), str(rj.Exclusive)
	c := conv{where: "parsing resume file: " + where}
	if j.Priority = c.u32("priority", rj.Priority); c.err != nil {
		return ResumeJob{}, c.err
	}
	return j, nil
}

func checkHostlist(where, s string) error {
	if len(s) > maxHostlistLen {
		return fmt.Errorf("parsing resume file: %s: hostlist of %d bytes, more than %d", where, len(s), maxHostlistLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("parsing resume file: %s: hostlist %.40q has a space or control character at byte %d", where, s, i)
		}
	}
	return nil
}
