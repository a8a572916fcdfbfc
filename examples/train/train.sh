#!/bin/bash
#SBATCH --job-name=burst-train-example
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=train-%j.out
#SBATCH --comment="burst: workload=train checkpoint=1m checkpoint_signal=USR1"
#
# No --gres or --nodes: burst sizes the job from its metadata at submission
# (cli_filter sets the GRES and the node count; give params=, tokens= and
# deadline= and it scales out over several nodes). Add --gres to fix the
# GPUs yourself: burst keeps what you ask for.
#
# Example checkpointing training job for burst. It "trains" TRAIN_STEPS steps
# of TRAIN_STEP_SECONDS (sleep), saves a checkpoint every
# TRAIN_CHECKPOINT_EVERY steps and whenever it gets the checkpoint signal,
# and resumes from its last checkpoint after a requeue.
#
# burst's protocol (agent/spotwatch):
#   - the checkpoint directory is $BURST_CHECKPOINT_DIR (shared storage, one
#     per job id, kept across requeues); the restart count is
#     $SLURM_RESTART_COUNT;
#   - before a spot instance is reclaimed, burst-agent sends the checkpoint
#     signal (SIGUSR1 unless checkpoint_signal= says otherwise) to this batch
#     shell, waits for $BURST_CHECKPOINT_DIR/.checkpointed-$SLURM_RESTART_COUNT,
#     then requeues the job;
#   - on a rebalance recommendation (EC2: this instance is at elevated risk)
#     burst drains the node, and with "rebalance=checkpoint" in the job's
#     metadata sends SIGUSR2 to this batch shell: an early checkpoint, no
#     marker; the job runs on.
# The signal is handled between steps: a step in flight is abandoned (it is
# redone after the requeue), so answering takes well under a second here;
# a real job should answer within burst-agent's grace period (default 90 s).
#
# On several nodes the batch script starts one rank per node with srun
# (the script itself, from the shared checkpoint directory, as a
# data-parallel job would start torchrun): every rank steps, rank 0 writes
# the checkpoints and the marker; srun forwards the checkpoint signal.
set -euo pipefail

STEPS=${TRAIN_STEPS:-100}
STEP_SECONDS=${TRAIN_STEP_SECONDS:-1}
EVERY=${TRAIN_CHECKPOINT_EVERY:-10}
RESTART=${SLURM_RESTART_COUNT:-0}
CKPT_DIR=${BURST_CHECKPOINT_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/checkpoints/${SLURM_JOB_ID:-local}}
CKPT=$CKPT_DIR/checkpoint     # "step=N": the last durable checkpoint
PROGRESS=$CKPT_DIR/progress   # last step reached, to count redone work
MARKER=$CKPT_DIR/.checkpointed-$RESTART

NODES=${SLURM_NNODES:-1}
RANK=${SLURM_PROCID:-0}
WHO=""
if ((NODES > 1)); then WHO="rank $RANK/$NODES on ${SLURMD_NODENAME:-?}: "; fi

log() { printf '%s job=%s restart=%s %s%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SLURM_JOB_ID:-local}" "$RESTART" "$WHO" "$*"; }

read_step() { # file -> the N of its "step=N" line, or 0
	local line=""
	[[ -f $1 ]] && read -r line <"$1"
	line=${line#step=}
	if [[ $line =~ ^[0-9]+$ ]]; then echo "$line"; else echo 0; fi
}

save() { # step: write a temporary file, flush it, rename over the checkpoint (rank 0)
	((RANK == 0)) || return 0
	local tmp="$CKPT.tmp.$$"
	printf 'step=%d\n' "$1" >"$tmp"
	sync "$tmp" 2>/dev/null || sync
	mv -f "$tmp" "$CKPT"
}

mkdir -p "$CKPT_DIR"
if ((NODES > 1)) && [[ -z ${BURST_TRAIN_RANKS:-} ]]; then
	# the batch step: one rank per node, started from shared storage
	cp -f "$0" "$CKPT_DIR/.train.sh"
	export BURST_TRAIN_RANKS=$NODES
	exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash "$CKPT_DIR/.train.sh" "$@"
fi
step=$(read_step "$CKPT")
reached=$(read_step "$PROGRESS")
if ((step > 0)); then
	log "resumed from checkpoint at step $step"
fi
redone=0
if ((reached > step)); then
	redone=$((reached - step))
	log "redoing $redone steps done after the last checkpoint"
fi

signalled=0
early=0
sleeper=""
trap 'signalled=1' USR1
trap 'early=1' USR2
trap 'if [[ -n $sleeper ]]; then kill "$sleeper" 2>/dev/null || true; fi; log "terminated at step $step"; exit 143' TERM

while ((step < STEPS)); do
	sleep "$STEP_SECONDS" &
	sleeper=$!
	if wait "$sleeper"; then
		step=$((step + 1))
		if ((RANK == 0)); then
			printf 'step=%d\n' "$step" >"$PROGRESS.tmp"
			mv -f "$PROGRESS.tmp" "$PROGRESS"
		fi
		log "step $step done"
		if ((step % EVERY == 0)); then
			save "$step"
			log "checkpoint at step $step"
		fi
	else
		kill "$sleeper" 2>/dev/null || true # interrupted by a signal: redo this step
	fi
	sleeper=""
	if ((early)); then
		early=0
		save "$step"
		log "early checkpoint at step $step (rebalance)"
	fi
	if ((signalled)); then
		signalled=0
		save "$step"
		if ((RANK == 0)); then
			printf 'step=%d\n' "$step" >"$MARKER.tmp"
			mv -f "$MARKER.tmp" "$MARKER"
			log "checkpoint at step $step on signal; wrote $MARKER"
		fi
	fi
done
save "$step"
log "done: $STEPS steps, $redone redone after this restart"
