package cmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/burst-hpc/burst/internal/blockwatch"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/interruption"
)

// startBlockWatch runs the Capacity Block watcher (internal/blockwatch) on
// the leader when a class names Capacity Blocks: their nodes are fenced so
// that no job runs into the block's reclaim, and evacuated (checkpoint,
// requeue, hand back) at EC2's warning. A watcher that cannot be built is
// logged and the daemon serves without it.
func startBlockWatch(ctx context.Context, st *settings, fence func(context.Context) error, log *slog.Logger) {
	cfg := st.cfg
	var blocks []string
	for _, c := range cfg.Classes {
		blocks = append(blocks, c.Reservations.BlockIDs()...)
	}
	if len(blocks) == 0 {
		return
	}
	prov, err := compose.Cloud(ctx, cfg, log)
	if err != nil {
		log.Error("Capacity Block watcher not started: jobs are not evacuated before a block ends", "err", err)
		return
	}
	// the fence is a Slurm reservation: the command line on every release
	// (slurm.api rest too: scontrol is on the head node)
	cli := compose.SlurmAt(cfg.Slurm.BinDir, compose.SlurmConf(cfg, os.Getenv), log)
	sl, err := compose.Slurm(cfg, os.Getenv, log)
	if err != nil {
		log.Error("Capacity Block watcher not started", "err", err)
		return
	}
	root := filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)
	h, err := interruption.New(interruption.SlurmClient{C: sl}, interruption.Options{CheckpointRoot: root, Grace: cfg.Agent.CheckpointGrace.Duration, By: "sizer", Logger: log})
	if err != nil {
		log.Error("Capacity Block watcher not started", "err", err)
		return
	}
	w, err := blockwatch.New(prov, h, cli, blockwatch.Options{Blocks: blocks, Fence: fence, Logger: log})
	if err != nil {
		log.Error("Capacity Block watcher not started", "err", err)
		return
	}
	log.Info("watching Capacity Blocks: nodes fenced before each block's reclaim, jobs evacuated at EC2's warning", "blocks", blocks)
	go w.Run(ctx)
}
