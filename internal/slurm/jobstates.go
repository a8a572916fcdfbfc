package slurm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/burst-hpc/burst/internal/hostlist"
)

// JobState is what a poll needs of a job: its state, reason and nodes.
// Client.JobStates reads it with one small squeue call on every release.
type JobState struct {
	ID        uint32
	State     string // as squeue prints it (same as Job.State): PENDING, CONFIGURING, RUNNING, ...
	Reason    string // None, Resources, Priority, BeginTime, JobHeldUser, ...
	Nodes     string // allocated nodes (hostlist); "" while pending
	NodeCount uint32 // allocated, or requested while pending
}

// JobFilter selects jobs for Client.JobStates. Empty fields select all;
// set fields must all match.
type JobFilter struct {
	IDs []uint32
	// States are squeue state names (PENDING, RUNNING, CONFIGURING,
	// COMPLETING, ...). Without it: every state when IDs are given, else
	// the jobs squeue lists by default (pending, running, suspended,
	// completing, configuring).
	States []string
	// Nodes: jobs allocated any of these nodes (plain node names).
	Nodes []string
	// Max, when positive, bounds the answer to Max jobs, the highest
	// priority first (a held job's priority is 0), so that a scan costs the
	// same however long the queue; the rest are not read. 0: every job.
	Max int
}

// jobStatesFormat is the squeue -o format JobStates reads. Every field is a
// number, a state name, a hostlist or Slurm's reason: none holds text a job
// user chose (job names and comments may hold '|' and newlines), so the
// plain-text form cannot be spoofed. The reason, which may hold spaces and
// commas ("ReqNodeNotAvail, UnavailableNodes:gpu-1"), comes last.
const jobStatesFormat = "%A|%T|%D|%N|%r"

// ParseJobStates parses `squeue -h -o '%A|%T|%D|%N|%r'`, one job per line.
func ParseJobStates(b []byte) ([]JobState, error) {
	if len(b) > MaxJSONSize {
		return nil, fmt.Errorf("parsing squeue job states: %d bytes, more than the %d allowed", len(b), MaxJSONSize)
	}
	var out []JobState
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "|", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("parsing squeue job states: line %d %.60q: want 5 fields (%s), got %d", i+1, line, jobStatesFormat, len(f))
		}
		id, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("parsing squeue job states: line %d: job id %q is not a positive 32-bit number", i+1, f[0])
		}
		js := JobState{ID: uint32(id), State: f[1], Nodes: f[3], Reason: strings.TrimSpace(f[4])}
		if js.State == "" || strings.IndexFunc(js.State, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r == '_') }) >= 0 {
			return nil, fmt.Errorf("parsing squeue job states: job %d: state %q is not a state name", id, f[1])
		}
		n, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parsing squeue job states: job %d: node count %q is not a count", id, f[2])
		}
		js.NodeCount = uint32(n)
		if strings.ContainsFunc(js.Nodes+js.Reason, func(r rune) bool { return r < 0x20 || r == 0x7f }) || strings.Contains(js.Nodes, " ") {
			return nil, fmt.Errorf("parsing squeue job states: job %d: control character or space in nodes %q / reason %q", id, js.Nodes, js.Reason)
		}
		out = append(out, js)
	}
	return out, nil
}

// finishedStates are the states squeue leaves out unless asked for.
var finishedStates = map[string]bool{"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true,
	"NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true, "OUT_OF_MEMORY": true,
	"SPECIAL_EXIT": true, "REVOKED": true}

// Brief returns the JobState of j.
func (j Job) Brief() JobState {
	return JobState{ID: j.ID, State: j.State, Reason: j.Reason, Nodes: j.Nodes, NodeCount: j.NodeCount}
}

// Matches reports whether squeue would list j for f: its ID is one of IDs,
// its State (as squeue prints it) one of States, or, without States or IDs,
// it has not finished; and it is allocated one of Nodes. For fakes of
// Client.JobStates.
func (f JobFilter) Matches(j Job) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, j.ID) {
		return false
	}
	switch {
	case len(f.States) > 0:
		if !slices.ContainsFunc(f.States, func(s string) bool { return strings.EqualFold(s, j.State) }) {
			return false
		}
	case len(f.IDs) == 0 && finishedStates[j.State]:
		return false
	}
	if len(f.Nodes) > 0 {
		names, err := hostlist.Expand(j.Nodes)
		if err != nil || !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(f.Nodes, n) }) {
			return false
		}
	}
	return true
}

// JobStateRef is one job of slurmrestd's jobs/state answer: the job's ID
// (for an array task, the array's job ID, with the task in ArrayTask) and
// its state as squeue prints it.
type JobStateRef struct {
	JobID     uint32
	ArrayTask string // "0", "[1-3]"; "" unless an array task
	State     string
}

// ParseJobStatesJSON parses slurmrestd's GET /slurm/v0.0.4x/jobs/state/
// answer (24.05+: {"jobs":[{"job_id":"5","state":["RUNNING"]}]}, array
// tasks as "3_0"): no reason, nodes or node count are in it.
func ParseJobStatesJSON(b []byte) ([]JobStateRef, error) {
	var d struct {
		doc
		Jobs *[]struct {
			JobID json.RawMessage `json:"job_id"`
			State strList         `json:"state"`
		} `json:"jobs"`
	}
	if err := decodeDoc("job state JSON", b, &d); err != nil {
		return nil, err
	}
	if err := docErrors("job state JSON", d.Meta, d.Errors); err != nil {
		return nil, err
	}
	if d.Jobs == nil {
		return nil, fmt.Errorf(`parsing job state JSON (%s): no "jobs" array`, d.Meta)
	}
	out := make([]JobStateRef, 0, len(*d.Jobs))
	for i, r := range *d.Jobs {
		// "5", "3_0", "3_[1-3]" (24.11, 26.05) or a number
		raw, task, _ := strings.Cut(strings.Trim(string(r.JobID), `"`), "_")
		id, err := strconv.ParseUint(raw, 10, 32)
		if err != nil || id == 0 || strings.ContainsAny(task, "\"\\ ") {
			return nil, fmt.Errorf("parsing job state JSON (%s): jobs[%d]: job_id %s is not a job ID (N or N_TASK)", d.Meta, i, r.JobID)
		}
		st, _, err := jobState(r.State)
		if err != nil {
			return nil, fmt.Errorf("parsing job state JSON (%s): job %s: state: %w", d.Meta, r.JobID, err)
		}
		out = append(out, JobStateRef{JobID: uint32(id), ArrayTask: task, State: st})
	}
	return out, nil
}
