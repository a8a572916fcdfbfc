// Package dashtest fills a sizer store with synthetic, deterministic data
// for the dashboard's tests and benchmarks (never for a production path):
// accounts, users, recurring job names, one instance per job with its
// launch and termination, agent GPU reports, decisions and spot notices.
package dashtest

import (
	"context"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/store"
)

// Classes are the classes the data uses (a 1-GPU and a 4-GPU L4 class).
func Classes() []sizing.Class {
	return []sizing.Class{
		{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 8, InstanceTypes: []string{"g6.xlarge", "g6.2xlarge"}},
		{Name: "l4x4", GPUModel: "l4", GPUsPerNode: 4, MaxNodes: 4, InstanceTypes: []string{"g6.12xlarge"}},
	}
}

// Spec says how much to make.
type Spec struct {
	Jobs     int
	Accounts []string // default nlp, vision, speech
	Users    int      // per account, default 4
	Names    int      // recurring job names per user, default 5
	// Now is the end of the data: jobs are spread over the month before it
	// (within its UTC month), the newest Live ones still running.
	Now  time.Time
	Live int
	// JobName, when set, names every 7th job (an XSS attempt, say);
	// Comment is every job's decision comment.
	JobName, Comment string
	// Nodes is how many nodes of each class the jobs' instances run on
	// (default 4): one after another, so each node runs Jobs/Nodes of a
	// class's instances in the month.
	Nodes int
	// Waits adds what a job's wait is split by: its node's boot report,
	// its run on the node and its start with Slurm's submit time (waits).
	Waits bool
}

// Fill writes the data and returns the job ids by account.
func Fill(ctx context.Context, st *store.Store, sp Spec) (map[string][]string, error) {
	if len(sp.Accounts) == 0 {
		sp.Accounts = []string{"nlp", "vision", "speech"}
	}
	if sp.Users <= 0 {
		sp.Users = 4
	}
	if sp.Names <= 0 {
		sp.Names = 5
	}
	if sp.Nodes <= 0 {
		sp.Nodes = 4
	}
	monthStart := time.Date(sp.Now.Year(), sp.Now.Month(), 1, 0, 0, 0, 0, time.UTC)
	span := sp.Now.Sub(monthStart)
	out := map[string][]string{}
	var seq uint64
	for i := 0; i < sp.Jobs; i++ {
		acct := sp.Accounts[i%len(sp.Accounts)]
		user := fmt.Sprintf("%s-u%d", acct, (i/len(sp.Accounts))%sp.Users)
		name := fmt.Sprintf("job%d", (i/7)%sp.Names)
		if sp.JobName != "" && i%7 == 3 {
			name = sp.JobName
		}
		four := i%3 == 0 // a third of the jobs ask for 4 GPUs and use 1
		class, typ, gpus, price := "l4", "g6.xlarge", 1, 0.41
		if four {
			class, typ, gpus, price = "l4x4", "g6.12xlarge", 4, 1.89
		}
		capacity := "spot"
		if i%5 == 4 {
			capacity, price = "on-demand", map[bool]float64{true: 4.6016, false: 0.8048}[four]
		}
		id := fmt.Sprint(1000 + i)
		start := monthStart.Add(time.Duration(float64(span) * float64(i) / float64(max(sp.Jobs, 1))))
		dur := time.Duration(20+i%97) * time.Minute
		live := i >= sp.Jobs-sp.Live
		if !live && start.Add(dur).After(sp.Now) {
			dur = sp.Now.Sub(start) / 2
		}
		node := fmt.Sprintf("%s-%d", class, 1+i%sp.Nodes)
		inst := fmt.Sprintf("i-%08x", i)
		job := sizerapi.Job{JobID: id, JobName: name, User: user, Account: acct, Class: class, GPUModel: "l4", GPUsPerNode: gpus, Nodes: 1, GPUMemoryMiB: 22888, Attempt: 1 + i%11/10}
		err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: inst, Node: node, InstanceType: typ, Zone: "us-east-1a", Capacity: capacity, Account: acct, Time: start,
			Job: &job}, price)
		if err != nil {
			return nil, err
		}
		if !live {
			if _, err := st.RecordTerminate(ctx, inst, start.Add(dur)); err != nil {
				return nil, err
			}
		}
		if sp.Waits {
			if err := waits(ctx, st, i, job, inst, node, start, dur, live); err != nil {
				return nil, err
			}
		}
		if err := st.RecordDecision(ctx, sizerapi.JobDecision{JobID: id, Time: start.Add(-time.Second), Class: class, InstanceType: typ, Zone: "us-east-1a", Capacity: capacity,
			PriceUSD: price, ExpectedUSD: price * 1.05, Reason: "cheapest " + capacity + " offering that fits", Offerings: 4, Comment: sp.Comment}); err != nil {
			return nil, err
		}
		// two GPU samples: GPU 0 busy, the others idle
		b := sizerapi.ReportBatch{Node: node, InstanceID: inst, GPUSource: sizerapi.GPUSourceNVML}
		for k := 0; k < 2; k++ {
			seq++
			r := sizerapi.Record{Seq: seq, Time: start.Add(time.Duration(k+1) * time.Minute), Kind: sizerapi.KindGPU}
			for g := 0; g < gpus; g++ {
				gr := sizerapi.GPUReading{Index: g, MemoryTotalBytes: 22888 << 20}
				if g == 0 {
					gr.UtilPercent, gr.MemoryUsedBytes, gr.JobIDs = uint32(60+i%30), uint64(4+i%9)<<30, []uint32{uint32(1000 + i)}
				}
				r.GPUs = append(r.GPUs, gr)
			}
			b.Records = append(b.Records, r)
		}
		if i%50 == 25 && !live {
			seq++
			b.Records = append(b.Records, sizerapi.Record{Seq: seq, Time: start.Add(dur - 2*time.Minute), Kind: sizerapi.KindInterruption,
				Event: &sizerapi.Event{InstanceID: inst, Action: "terminate", NoticeTime: start.Add(dur - 2*time.Minute),
					Jobs: []sizerapi.JobEvent{{JobID: uint32(1000 + i), Signal: "USR1", Checkpointed: true, Requeued: true, Waited: 4 * time.Second}}}})
		}
		if _, err := st.AddBatch(ctx, b); err != nil {
			return nil, err
		}
		out[acct] = append(out[acct], id)
	}
	return out, nil
}

// waits records job i's wait: submitted 2-41 s before its instance's
// launch (start), the node's bootstrap from 30 s after it, slurmd up 45-64 s
// after it, registered 2 s later, the job started 1 s after that and run
// to the end of the instance's life (dur) unless live.
func waits(ctx context.Context, st *store.Store, i int, j sizerapi.Job, inst, node string, start time.Time, dur time.Duration, live bool) error {
	slurmd := start.Add(time.Duration(45+i%20) * time.Second)
	registered := slurmd.Add(2 * time.Second)
	begin := registered.Add(time.Second)
	if !live && !begin.Before(start.Add(dur)) {
		return nil
	}
	if err := st.RecordBoot(ctx, store.Boot{InstanceID: inst, Node: node, Started: start.Add(30 * time.Second), Slurmd: slurmd, Registered: registered}); err != nil {
		return err
	}
	run := sizerapi.JobRun{JobID: j.JobID, Account: j.Account, User: j.User, Nodes: []string{node}, GPUsPerNode: j.GPUsPerNode, Start: begin}
	if err := st.RecordRun(ctx, run); err != nil {
		return err
	}
	if !live {
		run.End = start.Add(dur)
		if err := st.RecordRun(ctx, run); err != nil {
			return err
		}
	}
	return st.StartRun(ctx, "dashtest", sizerapi.JobStart{Job: j, Start: begin, Submit: start.Add(-time.Duration(2+i%40) * time.Second)})
}
