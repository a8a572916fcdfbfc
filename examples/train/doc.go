// Package train holds burst's example training jobs and their tests:
//
//   - train.sh, a single-node batch script that "trains" by sleeping (the
//     checkpoint protocol at its simplest; the e2e tests run it);
//   - train-ddp.sbatch, ddp-node.sh and ddp.py, the data-parallel PyTorch
//     template researchers copy: torchrun on every node, sharded-by-rank
//     checkpoints with a manifest, every rank checkpointing at the same step
//     on SIGUSR1 or a request file, bit-for-bit resumable.
//
// README.md describes the protocol; ddp_test.go proves the determinism
// across an interruption locally (two torchruns on 127.0.0.1, gloo) and
// slurm_test.go on a real two-node Slurm cluster (test/harness).
package train
