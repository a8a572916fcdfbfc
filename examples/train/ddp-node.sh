#!/bin/bash
# One node's share of train-ddp.sbatch: srun runs this once per node; it
# starts torchrun for this node's ranks.
#
#   ddp-node.sh HEAD_ADDR PORT [ddp.py arguments...]
#
# torchrun (torch.distributed.run, static rendezvous on
# HEAD_ADDR:PORT) gets --nnodes=$SLURM_NNODES --node_rank=$SLURM_NODEID and
# one rank per GPU this node can see (1 without CUDA).
#
# Signals: Slurm signals every process of the step (scancel -s USR1 JOBID,
# or srun forwarding what it gets). torchrun 1.13 handles SIGTERM, SIGINT,
# SIGHUP and SIGQUIT (it stops its workers) but not SIGUSR1, whose default
# action would kill it and orphan its workers. So SIGUSR1 is ignored here,
# before exec: torchrun keeps it ignored, its workers inherit that, and
# ddp.py takes it over.
#
# DDP_PYTHON: the interpreter with torch (default: the first of python3,
# /usr/bin/python3 that imports it); DDP_NPROC_PER_NODE: ranks on this node
# (default: the GPUs torch sees, 1 without CUDA).
set -euo pipefail
# First of all, so that a signal that comes early cannot kill this task.
trap '' USR1

if (($# < 2)); then
	echo "usage: $0 HEAD_ADDR PORT [ddp.py arguments...]" >&2
	exit 2
fi
head=$1 port=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

py=${DDP_PYTHON:-} nproc=${DDP_NPROC_PER_NODE:-}
if [[ -z $py || -z $nproc ]]; then # find them (about a second: torch is imported)
	found=""
	for cand in ${DDP_PYTHON:-} python3 /usr/bin/python3; do
		if gpus=$("$cand" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null); then
			found=$cand
			break
		fi
	done
	if [[ -z $found ]]; then
		echo "ddp-node.sh: no Python with torch (tried ${DDP_PYTHON:-} python3 /usr/bin/python3); install python3-torch or set DDP_PYTHON" >&2
		exit 1
	fi
	py=$found
	nproc=${nproc:-$((gpus > 0 ? gpus : 1))}
fi

# gloo binds to the address of this host's name, which Debian's /etc/hosts
# maps to 127.0.1.1: name the interface that reaches the head instead (the
# head's own address is on this host when this node is the head).
if [[ -z ${GLOO_SOCKET_IFNAME:-} ]]; then
	addr=$head
	if [[ ! $addr =~ ^[0-9.]+$ ]]; then
		addr=$(getent ahostsv4 "$head" | awk 'NR == 1 {print $1}')
	fi
	ifname=""
	if [[ -n $addr ]]; then
		ifname=$(ip -o -4 addr show to "$addr/32" 2>/dev/null | awk 'NR == 1 {print $2}')
		if [[ -z $ifname ]]; then
			ifname=$(ip -o -4 route get "$addr" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
		fi
	fi
	if [[ -n $ifname ]]; then
		export GLOO_SOCKET_IFNAME=$ifname
	fi
fi

# torchrun's own entry point (torch.distributed.run.main), through the
# interpreter found above. torch < 2.0 on Python >= 3.11 (Debian 12's
# python3-torch 1.13) cannot parse --redirects/--tee: Std.from_str looks the
# value up by iterating the IntFlag, which no longer yields NONE (0) or ALL
# (3), so plain torchrun dies with "'NoneType' object has no attribute
# 'get'". The launcher replaces from_str only when it is broken, and reports
# a stop by signal in one line instead of a traceback.
launcher='
import re, sys
from torch.distributed.elastic.multiprocessing.api import Std
if Std.from_str("0") is None:
    def from_str(cls, vm):
        if re.fullmatch(r"[0-3]", vm):
            return cls(int(vm))
        if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: <[0-3]> or <RANK:[0-3],...>")
    Std.from_str = classmethod(from_str)
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main
sys.argv[0] = "torchrun"
try:
    main()
except SignalException as e:  # SIGTERM from Slurm: the workers are stopped
    print(f"torchrun: stopped by {e.sigval.name}", file=sys.stderr)
    sys.exit(128 + int(e.sigval))
'

exec "$py" -c "$launcher" \
	--nnodes="${SLURM_NNODES:-1}" --node_rank="${SLURM_NODEID:-0}" --nproc_per_node="$nproc" \
	--master_addr="$head" --master_port="$port" --max_restarts=0 --monitor_interval=1 \
	"$here/ddp.py" "$@"
