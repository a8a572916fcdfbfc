#!/usr/bin/env python3
"""Data-parallel PyTorch training that survives spot interruptions on burst.

Copy this file, ddp-node.sh and train-ddp.sbatch, then replace build_model()
and build_dataset() with your own. Run it with torchrun (ddp-node.sh does,
once per node); DDP over NCCL when CUDA is available, over gloo otherwise.

Checkpoints go to $BURST_CHECKPOINT_DIR (shared storage, one per job id,
kept across requeues), as one directory per step:

    step-000000120/model.pt         model, optimizer, LR schedule (rank 0)
    step-000000120/rank-00000.pt    every rank: its RNG states (torch, CUDA,
    step-000000120/rank-00001.pt    numpy, python, augmentation generator)
    ...                             and its data position (epoch, batch)
    step-000000120/manifest.json    written last, by rank 0, once every part
                                    is durable: without it the step is not a
                                    checkpoint

Every file is written to a temporary name, fsynced, renamed and its
directory fsynced. A checkpoint is taken every --checkpoint-every steps, at
the end, and when asked:
  - SIGUSR1 to any rank (reason "interrupt"), or
  - the file $BURST_CHECKPOINT_DIR/.checkpoint-request, polled by rank 0
    each step; its lines "reason=interrupt|rebalance" and "restart=N"
    (a request naming an earlier restart is stale and dropped).
At each step boundary the ranks all-reduce (MAX) what they were asked, so all
of them checkpoint at the same step. For "interrupt", rank 0 then writes
$BURST_CHECKPOINT_DIR/.checkpointed-$SLURM_RESTART_COUNT ("step=N"), the
marker burst-agent waits for before it requeues the job; "rebalance" is an
early checkpoint without a marker. SIGTERM kills a rank at once (the
default action; nothing is half-replaced, since files are renamed into
place and a step counts only with its manifest). A run resumes from the
newest complete checkpoint, so at most --checkpoint-every steps are redone.
"""

import os
import signal

# cuBLAS is deterministic only with a fixed workspace (set before CUDA starts).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

# The checkpoint signal is blocked before anything can start a thread: every
# thread (gloo's, OpenMP's) inherits the mask, so no system call anywhere is
# interrupted by it, and the training loop takes it synchronously with
# sigtimedwait() at each step boundary.
CHECKPOINT_SIGNAL = signal.SIGUSR1
signal.pthread_sigmask(signal.SIG_BLOCK, {CHECKPOINT_SIGNAL})

import argparse  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

FORMAT = "burst-ddp-checkpoint/1"
REQUEST = ".checkpoint-request"
INTERRUPT, REBALANCE = 0, 1  # indexes of the per-step request vector


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1234, help="seed of the data, the model and every RNG")
    p.add_argument("--samples", type=int, default=65536, help="synthetic dataset size")
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--checkpoint-every", type=int, default=200, metavar="STEPS",
                   help="periodic checkpoint interval: the most steps a requeue redoes")
    p.add_argument("--keep", type=int, default=2, help="complete checkpoints kept")
    p.add_argument("--checkpoint-dir", default=os.environ.get("BURST_CHECKPOINT_DIR", ""),
                   help="default $BURST_CHECKPOINT_DIR")
    p.add_argument("--final", default="", help="final weights; default CHECKPOINT_DIR/final.pt")
    p.add_argument("--step-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="sleep after each step (stands for a heavier model in demos and tests)")
    p.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="collective timeout: how long ranks wait for a lost peer")
    a = p.parse_args(argv)
    problems = []
    for name in ("samples", "features", "classes", "hidden", "batch_size", "epochs", "checkpoint_every", "keep"):
        if getattr(a, name) < 1:
            problems.append(f"--{name.replace('_', '-')}={getattr(a, name)}: want at least 1")
    if not 0 <= a.dropout < 1:
        problems.append(f"--dropout={a.dropout}: want 0 <= dropout < 1")
    if a.step_sleep < 0 or a.timeout <= 0:
        problems.append(f"--step-sleep={a.step_sleep} / --timeout={a.timeout}: want >= 0 / > 0")
    if not a.checkpoint_dir:
        problems.append("no checkpoint directory: set $BURST_CHECKPOINT_DIR (burst's TaskProlog does) or --checkpoint-dir")
    if problems:
        p.error("; ".join(problems))
    return a


# ---------------------------------------------------------------- the model


def build_dataset(a):
    """A synthetic classification task, the same on every rank and every
    run for a seed: inputs from a normal distribution, labels from a fixed
    random linear map plus noise. Replace with your dataset."""
    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.samples, a.features, generator=g)
    w = torch.randn(a.features, a.classes, generator=g)
    y = (x @ w + 0.5 * torch.randn(a.samples, a.classes, generator=g)).argmax(dim=1)
    return TensorDataset(x, y)


def build_model(a):
    return nn.Sequential(
        nn.Linear(a.features, a.hidden), nn.ReLU(), nn.Dropout(a.dropout),
        nn.Linear(a.hidden, a.hidden), nn.ReLU(), nn.Dropout(a.dropout),
        nn.Linear(a.hidden, a.classes),
    )


class ResumableSampler(DistributedSampler):
    """DistributedSampler that can start an epoch part-way through: the
    order is still a function of (seed, epoch) only."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.skip = 0

    def set_position(self, epoch, skip_samples):
        self.set_epoch(epoch)
        self.skip = skip_samples

    def __iter__(self):
        return iter(list(super().__iter__())[self.skip:])

    def __len__(self):
        return self.num_samples - self.skip


# ------------------------------------------------------------ the job's side


class Job:
    """Who and where this rank is, and how it talks."""

    def __init__(self, a):
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.job_id = os.environ.get("SLURM_JOB_ID", "local")
        self.restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.dir = os.path.abspath(a.checkpoint_dir)
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
            self.backend = "nccl"
        else:
            self.device = torch.device("cpu")
            self.backend = "gloo"

    def log(self, msg):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(f"{now} job={self.job_id} restart={self.restart} rank={self.rank} {msg}", flush=True)


_signalled = False


def _on_signal(signum, frame):
    # Runs only if some thread left the signal unblocked; the flag is then
    # read at the next step boundary like a sigtimedwait() result.
    global _signalled
    _signalled = True


def take_signal():
    """Whether the checkpoint signal arrived since the last call."""
    global _signalled
    got, _signalled = _signalled, False
    while signal.sigtimedwait([CHECKPOINT_SIGNAL], 0) is not None:
        got = True
    return got


def take_request(job):
    """Rank 0: claim $BURST_CHECKPOINT_DIR/.checkpoint-request, if any, and
    return its reason index (None if there is none or it is stale)."""
    path = os.path.join(job.dir, REQUEST)
    claimed = f"{path}.{os.getpid()}"
    try:
        os.rename(path, claimed)  # atomic: a request written later is a new file
    except FileNotFoundError:
        return None
    try:
        with open(claimed, "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    finally:
        os.unlink(claimed)
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    reason = fields.get("reason", "interrupt").strip()
    restart = fields.get("restart", "").strip()
    if restart and (not restart.isdigit() or int(restart) < job.restart):
        job.log(f"dropped a stale checkpoint request (restart={restart!r}, this is restart {job.restart})")
        return None
    if reason == "rebalance":
        return REBALANCE
    if reason != "interrupt":
        job.log(f"checkpoint request with unknown reason {reason!r}: treated as interrupt")
    return INTERRUPT


# --------------------------------------------------------- durable files


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data):
    """Write bytes to path so that a reader sees the old file or the whole
    new one, and the new one survives a crash once this returns. Returns
    its size and sha256."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    fsync_dir(os.path.dirname(path))
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def torch_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def step_dir(job, step):
    return os.path.join(job.dir, f"step-{step:09d}")


def read_manifest(path):
    """The manifest of a step directory if the checkpoint is complete: the
    manifest parses and every part has its recorded size and hash."""
    try:
        with open(os.path.join(path, "manifest.json"), "rb") as f:
            m = json.load(f)
        if m.get("format") != FORMAT:
            return None
        for name, want in m["files"].items():
            with open(os.path.join(path, name), "rb") as f:
                data = f.read()
            if len(data) != want["size"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
                return None
        return m
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_steps(job):
    out = []
    for name in os.listdir(job.dir):
        if name.startswith("step-") and name[5:].isdigit():
            out.append(int(name[5:]))
    return sorted(out)


# ------------------------------------------------------------ checkpoints


def rng_state(aug):
    s = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "augment": aug.get_state(),
    }
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state()
    return s


def set_rng_state(s, aug):
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    aug.set_state(s["augment"])
    if torch.cuda.is_available() and "cuda" in s:
        torch.cuda.set_rng_state(s["cuda"])


def save_checkpoint(job, a, st, reason):
    """Every rank writes its part; once all are durable, rank 0 writes the
    manifest (and, for an interrupt, burst's marker)."""
    t0 = time.monotonic()
    d = step_dir(job, st["step"])
    os.makedirs(d, exist_ok=True)
    files = {}
    if job.rank == 0:
        files["model.pt"] = write_atomic(os.path.join(d, "model.pt"), torch_bytes({
            "model": st["model"].module.state_dict(),
            "optimizer": st["optimizer"].state_dict(),
            "scheduler": st["scheduler"].state_dict(),
            "step": st["step"],
        }))
    part = f"rank-{job.rank:05d}.pt"
    files[part] = write_atomic(os.path.join(d, part), torch_bytes({
        "rank": job.rank,
        "world_size": job.world,
        "step": st["step"],
        "epoch": st["epoch"],
        "batch": st["batch"],
        "sampler": {"seed": a.seed, "epoch": st["epoch"], "skip_samples": st["batch"] * a.batch_size},
        "rng": rng_state(st["augment"]),
    }))
    job.log(f"wrote its checkpoint part for step {st['step']} ({reason})")
    # The gather is also the barrier: it returns once every rank's part is durable.
    parts = [None] * job.world
    dist.all_gather_object(parts, files)
    if job.rank != 0:
        return
    manifest = {
        "format": FORMAT, "step": st["step"], "epoch": st["epoch"], "batch": st["batch"],
        "world_size": job.world, "reason": reason, "seed": a.seed,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "files": {k: v for p in parts for k, v in p.items()},
    }
    write_atomic(os.path.join(d, "manifest.json"), json.dumps(manifest, indent=1, sort_keys=True).encode())
    job.log(f"checkpoint at step {st['step']} complete: {len(manifest['files'])} files from {job.world} ranks "
            f"({reason}, {time.monotonic() - t0:.2f}s)")
    if reason == "interrupt":
        marker = os.path.join(job.dir, f".checkpointed-{job.restart}")
        write_atomic(marker, f"step={st['step']}\n".encode())
        job.log(f"wrote {marker} (step {st['step']})")
    prune(job, a.keep, st["step"])


def prune(job, keep, newest):
    """Rank 0: keep the newest `keep` complete checkpoints up to newest. The
    manifest goes first, so a half-removed step is never taken for one."""
    complete = [s for s in checkpoint_steps(job) if s <= newest and os.path.exists(os.path.join(step_dir(job, s), "manifest.json"))]
    for s in complete[:-keep]:
        d = step_dir(job, s)
        os.unlink(os.path.join(d, "manifest.json"))
        fsync_dir(d)
        shutil.rmtree(d)


def find_resume(job, a):
    """Rank 0: the newest complete checkpoint's manifest (None: start
    afresh). Step directories without a manifest (a write cut short) are
    removed; one whose files do not match its manifest is skipped."""
    found = None
    for s in reversed(checkpoint_steps(job)):
        d = step_dir(job, s)
        if not os.path.exists(os.path.join(d, "manifest.json")):
            job.log(f"removing incomplete checkpoint {d}")
            shutil.rmtree(d, ignore_errors=True)
        elif found is None:
            found = read_manifest(d)
            if found is None:
                job.log(f"skipping checkpoint {d}: its files do not match its manifest")
    if found is None:
        return None
    if found["world_size"] != job.world or found["seed"] != a.seed:
        raise SystemExit(
            f"checkpoint {step_dir(job, found['step'])} was written by {found['world_size']} ranks with seed "
            f"{found['seed']}; this run has {job.world} ranks and seed {a.seed}. Resume with the same node and "
            f"GPU count and seed, or start afresh with another $BURST_CHECKPOINT_DIR.")
    return found


def load_checkpoint(job, st, step):
    d = step_dir(job, step)
    # weights_only=False: the parts hold numpy and python RNG states, which
    # the restricted unpickler refuses (and torch >= 2.6 uses it by default).
    # These files are the job's own, in its own checkpoint directory.
    m = torch.load(os.path.join(d, "model.pt"), map_location="cpu", weights_only=False)
    st["model"].module.load_state_dict(m["model"])
    st["optimizer"].load_state_dict(m["optimizer"])
    st["scheduler"].load_state_dict(m["scheduler"])
    r = torch.load(os.path.join(d, f"rank-{job.rank:05d}.pt"), map_location="cpu", weights_only=False)
    if r["rank"] != job.rank or r["step"] != step:
        raise SystemExit(f"{d}: part of rank {r['rank']} step {r['step']} under rank {job.rank} step {step}")
    set_rng_state(r["rng"], st["augment"])
    st.update(step=step, epoch=r["epoch"], batch=r["batch"])


def weights_sha256(model):
    """sha256 over the state dict: names, dtypes, shapes and raw bytes."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ------------------------------------------------------------ training


def main(argv):
    a = parse_args(argv)
    signal.signal(CHECKPOINT_SIGNAL, _on_signal)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise SystemExit("ddp.py: no RANK/WORLD_SIZE: start it with torchrun (see ddp-node.sh)")
    job = Job(a)
    os.makedirs(job.dir, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group(job.backend, timeout=datetime.timedelta(seconds=a.timeout))
    job.log(f"pid {os.getpid()} up: {job.world} ranks, backend {job.backend}, device {job.device}, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, checkpoints in {job.dir}")

    # The same seed everywhere for the data and the initial weights, then a
    # per-rank stream for dropout and augmentation.
    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    dataset = build_dataset(a)
    model = build_model(a).to(job.device)
    torch.manual_seed(a.seed * 1000 + 1 + job.rank)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(a.seed * 1000 + 1 + job.rank)
    augment = torch.Generator().manual_seed(a.seed * 1000 + 500 + job.rank)
    sampler = ResumableSampler(dataset, num_replicas=job.world, rank=job.rank, shuffle=True, seed=a.seed, drop_last=True)
    steps_per_epoch = sampler.num_samples // a.batch_size
    if steps_per_epoch < 1:
        raise SystemExit(f"--samples={a.samples} over {job.world} ranks gives no batch of {a.batch_size}")
    total = steps_per_epoch * a.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
    st = {"model": None, "optimizer": optimizer, "scheduler": scheduler, "augment": augment,
          "step": 0, "epoch": 0, "batch": 0}

    # Rank 0 picks the checkpoint; every rank loads the same step.
    decision = torch.tensor([-1], dtype=torch.int64)
    if job.rank == 0:
        try:
            m = find_resume(job, a)
            decision[0] = m["step"] if m else -1
        except SystemExit as e:
            job.log(str(e))
            decision[0] = -2
    decision = decision.to(job.device)
    dist.broadcast(decision, 0)
    resume = int(decision.item())
    if resume == -2:
        raise SystemExit("cannot resume: see rank 0's log")
    st["model"] = DDP(model, device_ids=[job.local_rank] if job.backend == "nccl" else None)
    if resume >= 0:
        load_checkpoint(job, st, resume)
        job.log(f"resumed from checkpoint at step {resume} (epoch {st['epoch']}, batch {st['batch']})")
    if job.rank == 0:
        job.log(f"training {total} steps ({a.epochs} epochs of {steps_per_epoch}), "
                f"checkpoint every {a.checkpoint_every}")

    loss_fn = nn.CrossEntropyLoss()
    loader_gen = torch.Generator()
    ddp = st["model"]
    ddp.train()
    while st["step"] < total:
        sampler.set_position(st["epoch"], st["batch"] * a.batch_size)
        # The loader's own generator, reseeded per epoch: left to itself it
        # would draw from the global RNG whenever an iterator starts, which
        # differs between a run that starts mid-epoch and one that does not.
        loader_gen.manual_seed(a.seed * 1000 + st["epoch"])
        loader = DataLoader(dataset, batch_size=a.batch_size, sampler=sampler, drop_last=True, generator=loader_gen)
        for x, y in loader:
            x = x + 0.01 * torch.randn(x.shape, generator=augment)  # per-rank augmentation
            x, y = x.to(job.device), y.to(job.device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            st["step"] += 1
            st["batch"] += 1
            if st["batch"] == steps_per_epoch:
                st["epoch"], st["batch"] = st["epoch"] + 1, 0
            if job.rank == 0:
                job.log(f"step {st['step']} done epoch={st['epoch']} batch={st['batch']} loss={loss.item().hex()}")
            if a.step_sleep:
                time.sleep(a.step_sleep)

            # Step boundary: agree on what was asked, so that every rank
            # checkpoints at this same step.
            asked = torch.zeros(2, dtype=torch.int32)
            if take_signal():
                asked[INTERRUPT] = 1
                job.log(f"got SIGUSR1 after step {st['step']}")
            if job.rank == 0:
                r = take_request(job)
                if r is not None:
                    asked[r] = 1
                    job.log(f"got {('an interrupt', 'a rebalance')[r]} checkpoint request after step {st['step']}")
            asked = asked.to(job.device)
            dist.all_reduce(asked, op=dist.ReduceOp.MAX)
            asked = asked.tolist()
            if asked[INTERRUPT]:
                save_checkpoint(job, a, st, "interrupt")
            elif asked[REBALANCE]:
                save_checkpoint(job, a, st, "rebalance")
            elif st["step"] % a.checkpoint_every == 0 or st["step"] == total:
                save_checkpoint(job, a, st, "periodic" if st["step"] < total else "final")
            if st["batch"] == 0:
                break  # an epoch ended: the next one gets a fresh order

    if resume == total:
        job.log("already trained: the checkpoint is at the last step")
    if job.rank == 0:
        final = a.final or os.path.join(job.dir, "final.pt")
        write_atomic(final, torch_bytes(ddp.module.state_dict()))
        job.log(f"done: {st['step']} steps; final weights in {final}; weights sha256 {weights_sha256(ddp.module)}")
    dist.barrier()


def run(argv):
    """main(), then a hard exit. torch 1.13 can deadlock tearing a gloo
    process group down at interpreter exit: ~ProcessGroupGloo (reached from
    DDP's Reducer) joins a worker thread while holding the GIL, and that
    thread, freeing the last collective's tensor, waits for the GIL (seen
    about once in ten runs on a loaded machine; torchrun then waits for the
    rank forever). Every file is durable by now and the ranks have passed
    their last barrier, so skipping the destructors loses nothing."""
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            code = 1
        else:
            code = e.code or 0
    except BaseException:  # noqa: B902 - report it as Python would, then exit
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
