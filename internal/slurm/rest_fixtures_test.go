package slurm

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jobView and nodeView are the fields of a job and node that do not change
// between two reads a moment apart (a pending job's expected start time
// does).
func jobView(j Job) Job {
	return Job{ID: j.ID, ArrayJobID: j.ArrayJobID, Name: j.Name, User: j.User, Account: j.Account, Partition: j.Partition,
		State: j.State, StateFlags: j.StateFlags, Reason: j.Reason, Nodes: j.Nodes, BatchHost: j.BatchHost, Comment: j.Comment,
		AdminComment: j.AdminComment, Extra: j.Extra, Features: j.Features, TRESPerNode: j.TRESPerNode, TRESPerJob: j.TRESPerJob,
		GRESPerNode: j.GRESPerNode, GRESPerJob: j.GRESPerJob, CPUs: j.CPUs, Tasks: j.Tasks, NodeCount: j.NodeCount,
		MemoryPerNodeMB: j.MemoryPerNodeMB, MemoryPerCPUMB: j.MemoryPerCPUMB, TimeLimit: j.TimeLimit, Requeue: j.Requeue,
		RestartCount: j.RestartCount, SubmitTime: j.SubmitTime, WorkDir: j.WorkDir}
}

func nodeView(n Node) Node {
	n.BootTime, n.SlurmdVersion = n.BootTime.Truncate(0), ""
	return n
}

// TestRESTFixturesMatchCLI: slurmrestd's answers (testdata/<release>/rest-*,
// the data version burst speaks there over REST: 26.05's is v0.0.45 where
// the command line pins v0.0.42) decode, through the same shape decoders,
// to what the command line printed in the same run.
func TestRESTFixturesMatchCLI(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			cliJobs, err := ParseJobsJSON(readTestdata(t, rel+"/squeue.json"))
			if err != nil {
				t.Fatal(err)
			}
			restJobs, err := ParseJobsJSON(readTestdata(t, rel+"/rest-jobs.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(restJobs) != len(cliJobs) || len(restJobs) != 7 {
				t.Fatalf("REST %d jobs, command line %d, want 7 each", len(restJobs), len(cliJobs))
			}
			byCLI := byID(cliJobs)
			for _, j := range restJobs {
				if got, want := jobView(j), jobView(byCLI[j.ID]); !reflect.DeepEqual(got, want) {
					t.Errorf("job %d over REST:\n%+v\ncommand line:\n%+v", j.ID, got, want)
				}
			}
			one, err := ParseJobsJSON(readTestdata(t, rel+"/rest-job.json"))
			if err != nil || len(one) != 1 || one[0].ID != 6 || one[0].State != "CONFIGURING" || one[0].Nodes != "gpu-2" {
				t.Errorf("GET job/6: %+v, %v", one, err)
			}

			cliNodesFile := rel + "/scontrol-show-node.json"
			if rel == "22.05" {
				cliNodesFile = rel + "/sinfo.json"
			}
			cliNodes, err := ParseNodesJSON(readTestdata(t, cliNodesFile))
			if err != nil {
				t.Fatal(err)
			}
			restNodes, err := ParseNodesJSON(readTestdata(t, rel+"/rest-nodes.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(restNodes) != 7 || len(cliNodes) != 7 {
				t.Fatalf("REST %d nodes, command line %d, want 7 each", len(restNodes), len(cliNodes))
			}
			for i := range restNodes {
				if got, want := nodeView(restNodes[i]), nodeView(cliNodes[i]); !reflect.DeepEqual(got, want) {
					t.Errorf("node %s over REST:\n%+v\ncommand line:\n%+v", got.Name, got, want)
				}
			}
			big, err := ParseNodesJSON(readTestdata(t, rel+"/rest-node.json"))
			if err != nil || len(big) != 1 || big[0].Name != "big-1" || !big[0].HasFlag("DRAIN") || big[0].Reason != "capacity test" {
				t.Errorf("GET node/big-1: %+v, %v", big, err)
			}
		})
	}
}

// TestJobStatesJSONFixtures: GET jobs/state/ (24.05+) names every job with
// the state squeue prints.
func TestJobStatesJSONFixtures(t *testing.T) {
	for _, rel := range []string{"24.11", "26.05"} {
		t.Run(rel, func(t *testing.T) {
			got, err := ParseJobStatesJSON(readTestdata(t, rel+"/rest-jobs-state.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := ParseJobStates(readTestdata(t, rel+"/squeue-states.txt"))
			if err != nil {
				t.Fatal(err)
			}
			// squeue lists a pending array once (3_[0-3]); jobs/state per task
			states := map[uint32]string{}
			for _, s := range want {
				states[s.ID] = s.State
			}
			tasks := 0
			for _, s := range got {
				if s.ArrayTask != "" {
					tasks++
				}
				if w, ok := states[s.JobID]; !ok || s.State != w {
					t.Errorf("job %d_%s: jobs/state says %s, squeue %q", s.JobID, s.ArrayTask, s.State, w)
				}
			}
			if len(got) != 10 || tasks != 4 {
				t.Errorf("jobs/state: %d jobs, %d array tasks; want 10 and 4: %+v", len(got), tasks, got)
			}
		})
	}
	if _, err := ParseJobStatesJSON([]byte(`{"jobs":[{"job_id":"x","state":["RUNNING"]}]}`)); err == nil || !strings.Contains(err.Error(), "job_id") {
		t.Errorf("a bad job_id: %v", err)
	}
	if got, err := ParseJobStatesJSON([]byte(`{"jobs":[{"job_id":7,"state":["RUNNING","CONFIGURING"]}]}`)); err != nil ||
		!slices.Equal(got, []JobStateRef{{JobID: 7, State: "CONFIGURING"}}) {
		t.Errorf("a numeric job_id with flags: %+v, %v", got, err)
	}
}
