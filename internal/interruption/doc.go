// Package interruption is what burst does to the jobs of a node EC2 is
// about to take back, shared by the two places a notice arrives: the node's
// own burst-agent (IMDS, agent/spotwatch) and burst-sizer serve on the head
// node (the EventBridge events of an SQS queue, internal/notices), so that a
// node whose agent is dead still gets its jobs checkpointed and requeued.
//
// # A spot interruption (Handler.Interrupt)
//
//  1. The node is drained (no new jobs).
//  2. Every running job with an allocation on it, on whichever nodes its
//     other ranks run, is sent its checkpoint signal through slurmctld
//     (scancel), which reaches the job wherever it runs: by default SIGUSR1
//     to the batch shell (scancel --batch; the job's metadata may name
//     another with checkpoint_signal=), which forwards the request to every
//     rank (examples/train: the request file rank 0 reads, then all ranks
//     agree on one step); with checkpoint_to=steps every process of every
//     step on every node gets it (scancel without --batch).
//  3. It waits for $BURST_CHECKPOINT_DIR/.checkpointed-$SLURM_RESTART_COUNT,
//     which the job writes once every rank's part is durable, until the
//     grace period ends or Reserve before EC2's deadline. A marker counts
//     when it was written after the signal (less MarkerSkew for clocks),
//     so a stale one is ignored and nothing in the job's directory is ever
//     written or removed by burst (it is the user's).
//  4. If the same run of the job is still there (Slurm-side idempotence: the
//     other notice path may have requeued it already), the job's
//     AdminComment gets a Note naming the lost node and the run, and the job
//     is requeued as a whole and made eligible at once. The Note is how
//     burst-suspend's epilog knows to hold the job's surviving nodes for its
//     relaunch (internal/lifecycle), so that only the lost node is replaced.
//  5. The node is handed back (POWER_DOWN_FORCE): Slurm runs SuspendProgram,
//     which terminates the instance.
//
// RequeueNow is the same without the signal and the wait: for a node Slurm
// cannot reach, or a job whose run is still there after the agent's own
// deadline.
//
// # A rebalance recommendation (Handler.Rebalance)
//
// The node is drained; running jobs go on undisturbed. A job whose metadata
// says rebalance=checkpoint is sent SIGUSR2 to its batch shell:
// examples/train's early checkpoint (no marker, no requeue).
package interruption
