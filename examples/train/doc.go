// Package train holds burst's example checkpointing training job,
// train.sh, and its test. See train.sh for the checkpoint protocol.
package train
