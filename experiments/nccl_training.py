#!/usr/bin/env python3
"""Data-parallel training through NCCL, bit for bit against fplab's emulated all-reduce.

    python3 experiments/nccl_training.py --ranks 4 --algorithm Ring --protocol Simple --channels 4 \\
        --format fp32 --steps 20 --json nccl_training.jsonl

R processes, one a GPU, train replicas of a small CNN on their shards of a seeded synthetic batch
with deterministic cuDNN and cuBLAS kernels (TF32 off). Each step a rank flattens its gradients
into one buffer (cast to bf16 or fp16 with --format) and NCCL all-reduces it (dist.all_reduce, a
sum) with the algorithm, protocol and channel count pinned through NCCL's environment; before
that, rank 0 gathers every rank's buffer and afterwards compares NCCL's sums with
fplab.nccl_all_reduce's, every element's bits. Then each rank takes an SGD step with sum / R.

Afterwards the run is replayed in one process on one GPU: the R shards' gradients one after
another, their sum by fplab.nccl_all_reduce alone, the same updates. The replay's final weights
must be the NCCL run's, byte for byte (SHA-256): fplab's model of NCCL's order reproduces a
data-parallel training run without NCCL and without several GPUs.

Prints one line (the sums compared are the parameters times the steps; the weights' SHA-256 of
the run and of the replay) and writes a JSON line (--json); exits 0 when every sum and the
weights are equal, 1 when a bit differs, 2 on bad arguments.

    python3 experiments/nccl_training.py --backend gloo --ranks 2 --steps 2

runs the same on CPU processes, without GPUs: gloo's order is not NCCL's, but two ranks' sum has
only one (a + b = b + a), so with two ranks it checks the script itself (a test does). Gloo takes
fp32 and fp16 buffers here (Debian's PyTorch 1.13 cannot sum bf16 with it); --algorithm,
--protocol and --channels then change only the emulation's side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import fplab

TORCH_TYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def deterministic() -> None:
    """The same kernels and bits on every run and every GPU of one kind."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(1)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)


class SmallCnn(nn.Module):
    """About 420,000 parameters: a gradient buffer of a few NCCL chunks per channel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def model_and_data(args, device: torch.device):
    """The initial weights and every step's batch, the same for every rank and the replay."""
    torch.manual_seed(args.seed)
    model = SmallCnn().to(device)
    g = torch.Generator().manual_seed(args.seed + 1)
    images = torch.randn(args.steps, args.ranks * args.shard, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (args.steps, args.ranks * args.shard), generator=g)
    return model, images, labels


def local_gradient(model, images, labels, step, rank, args, device) -> torch.Tensor:
    """This rank's gradient of its shard as one flat buffer in the all-reduce's type."""
    model.zero_grad(set_to_none=False)
    shard = slice(rank * args.shard, (rank + 1) * args.shard)
    x = images[step, shard].to(device)
    y = labels[step, shard].to(device)
    F.cross_entropy(model(x), y).backward()
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    return flat.to(TORCH_TYPES[args.format])


@torch.no_grad()
def sgd_step(model, summed: torch.Tensor, args) -> None:
    """w -= lr * (sum / R), in float32, the same on every rank and in the replay."""
    mean = summed.float() / args.ranks
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p -= args.lr * mean[offset : offset + n].view_as(p)
        offset += n


def weights_sha(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def emulated_sum(buffers: list[torch.Tensor], args) -> np.ndarray:
    rows = np.stack([b.float().cpu().numpy().astype(np.float64) for b in buffers])
    return fplab.nccl_all_reduce(rows, args.algorithm, args.protocol, args.channels, args.format).astype(np.float32)


def worker(rank: int, args, port: int, results) -> None:
    # NCCL reads these when the communicator is made; multicast (NVLS) stays off.
    os.environ.update(
        NCCL_ALGO=args.algorithm, NCCL_PROTO=args.protocol, NCCL_MIN_NCHANNELS=str(args.channels),
        NCCL_MAX_NCHANNELS=str(args.channels), NCCL_NVLS_ENABLE="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )
    deterministic()
    if args.backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=args.ranks, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    # Rank 0 sees every rank's buffer through gloo, on the CPU: an NCCL all-gather would run under
    # the pinned NCCL_ALGO, and NCCL has no tree all-gather.
    gather_group = dist.new_group(backend="gloo")
    model, images, labels = model_and_data(args, device)
    differing = 0
    elements = 0
    for step in range(args.steps):
        flat = local_gradient(model, images, labels, step, rank, args, device)
        mine = flat.float().cpu()  # bf16 and fp16 values are float32 values
        gathered = [torch.empty_like(mine) for _ in range(args.ranks)]
        dist.all_gather(gathered, mine, group=gather_group)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        if rank == 0:
            want = emulated_sum(gathered, args)
            got = flat.float().cpu().numpy()
            differing += int(np.count_nonzero(want.view(np.uint32) != got.view(np.uint32)))
            elements += got.size
        sgd_step(model, flat, args)
    if rank == 0:
        results.put({"differing": differing, "elements": elements, "sha": weights_sha(model),
                     "parameters": sum(p.numel() for p in model.parameters())})
    dist.barrier()
    dist.destroy_process_group()


def replay(args) -> str:
    """The same training in one process: the shards one after another, fplab's sum, no NCCL."""
    deterministic()
    device = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    model, images, labels = model_and_data(args, device)
    for step in range(args.steps):
        buffers = [local_gradient(model, images, labels, step, r, args, device) for r in range(args.ranks)]
        summed = torch.from_numpy(emulated_sum(buffers, args)).to(device)
        sgd_step(model, summed, args)
    return weights_sha(model)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    paragraphs = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(
        description="\n\n".join(paragraphs[i] for i in (0, 2, 3)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (on 4 GPUs, then without GPUs):\n"
        "  python3 experiments/nccl_training.py --ranks 4 --algorithm Ring --protocol LL128 --channels 4 --format bf16\n"
        "  python3 experiments/nccl_training.py --backend gloo --ranks 2 --steps 2\n\n"
        "Without GPUs (--backend gloo): gloo's order is not NCCL's, but two ranks' sum has one order, so\n"
        "two ranks check the script itself; fp32 and fp16 buffers (gloo cannot sum bf16 here).\n\n"
        "exit status: 0 every sum and the weights equal, 1 a bit differs, 2 bad arguments")
    parser.add_argument("--ranks", type=int, default=2,
                        help="processes, one a GPU with nccl (default 2)")
    parser.add_argument("--algorithm", default="Ring", choices=["Ring", "Tree"], help="NCCL_ALGO (default Ring)")
    parser.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"],
                        help="NCCL_PROTO (default Simple)")
    parser.add_argument("--channels", type=int, default=1,
                        help="NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS, 1 to 64 (default 1)")
    parser.add_argument("--format", default="fp32", choices=sorted(TORCH_TYPES),
                        help="the gradient buffers' type (default fp32)")
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--shard", type=int, default=32, help="examples per rank and step (default 32)")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD's learning rate (default 0.05)")
    parser.add_argument("--seed", type=int, default=1, help="the weights' and batches' seed (default 1)")
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"],
                        help="gloo: CPU processes, no GPUs; two ranks only (a check of the script)")
    parser.add_argument("--json", help="append the result as one JSON line")
    args = parser.parse_args()
    if args.ranks < 1 or args.steps < 1 or args.shard < 1:
        parser.error("--ranks, --steps and --shard must be at least 1")
    if not 1 <= args.channels <= 64:
        parser.error("--channels must be from 1 to 64 (NCCL's most)")
    if args.backend == "gloo" and args.ranks > 2:
        parser.error("--backend gloo: gloo's order is not NCCL's, so only --ranks 1 or 2 check anything")
    if args.backend == "gloo" and args.format == "bf16":
        parser.error("--backend gloo: gloo cannot sum bf16 buffers here; use --format fp32 or fp16")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.backend == "nccl" and gpus < args.ranks:
        print(f"SKIPPED: {args.ranks} ranks need {args.ranks} GPUs; this machine has {gpus} "
              f"(without GPUs: --backend gloo --ranks 2)")
        return 0
    start = time.time()
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(worker, args=(args, free_port(), results), nprocs=args.ranks, start_method="spawn")
    run = results.get()
    replayed = replay(args)
    row = {"ranks": args.ranks, "algorithm": args.algorithm, "protocol": args.protocol, "channels": args.channels,
           "format": args.format, "steps": args.steps, "parameters": run["parameters"],
           "sums_differing": run["differing"], "sums_compared": run["elements"], "nccl_sha256": run["sha"],
           "replay_sha256": replayed, "replay_equal": replayed == run["sha"], "torch": torch.__version__,
           "backend": args.backend,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())) if args.backend == "nccl" else None,
           "gpu": torch.cuda.get_device_name(0) if args.backend == "nccl" else None,
           "seconds": round(time.time() - start, 1)}
    print(f"{args.ranks} ranks {args.algorithm} {args.protocol} {args.channels} channel(s) {args.format}: "
          f"{row['sums_compared'] - row['sums_differing']}/{row['sums_compared']} gradient sums = fplab's, "
          f"replay {'==' if row['replay_equal'] else '!='} {args.backend.upper()} run "
          f"(weights' SHA-256: run {run['sha'][:12]}, replay {replayed[:12]}), "
          f"{row['seconds']} s")
    if args.json:
        with open(args.json, "a") as out:
            out.write(json.dumps(row) + "\n")
    return 0 if row["sums_differing"] == 0 and row["replay_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
