"""Replicas trained several at a time, in worker processes (fplab.torch.experiment's ``workers``).

Why: one replica on a GPU leaves the GPU idle much of the time, because the host's Python sets
the pace of an emulated step (docs/results/torch_emulate.md); processes side by side fill it. A
replica's bits do not depend on where it trains: its seeds and noise keys come from its job alone.

The workers are started with ``spawn`` (a CUDA context cannot cross a fork). Each gets the data
once, through shared memory (torch.multiprocessing), and PyTorch's TF32 switches as the caller set
them (a new process starts with PyTorch's defaults), moves the data to the device once, and trains
the jobs it is sent; what it sends back is a plain tuple (ReplicaFields). model_fn and loss_fn
travel by reference, so they must be importable by name: defined at the top level of a module or
of a script whose experiment() call is under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import pickle
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.multiprocessing

from .._core import Error
from ._native_run import set_switches, switches
from ._replica import ReplicaFields, train_replica

_WHO = "fplab.torch.experiment"

#: what this worker process was given once: (train on the device, test inputs on the device, test labels)
_given: Optional[Tuple[Tuple[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor]] = None


def check_sendable(**functions: Optional[Callable]) -> None:
    """One clear line now rather than a worker's traceback later (None: not given, nothing to send)."""
    for what, fn in functions.items():
        if fn is None:
            continue
        module = getattr(fn, "__module__", None)
        if module == "__main__" and not getattr(sys.modules.get("__main__"), "__file__", None):
            raise Error(f"{_WHO}: workers > 1 cannot send {what} defined in an interactive session to worker "
                        f"processes: define it in a module and import it")
        try:
            pickle.dumps(fn)
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            raise Error(f"{_WHO}: workers > 1 sends {what} to worker processes, which needs a function defined at "
                        f"the top level of a module or script, not a lambda or a nested function ({error})"
                        .splitlines()[0]) from None


def train_in_workers(workers: int, model_fn: Callable, jobs: Dict[int, dict], recipe: Any,
                     train: Tuple[torch.Tensor, torch.Tensor], test_x: torch.Tensor, test_y: torch.Tensor,
                     loss_fn: Callable, profiles_dir: Sequence[str], math: str,
                     device: torch.device, optimizer_fn: Optional[Callable] = None,
                     scheduler_fn: Optional[Callable] = None) -> Iterator[Tuple[int, ReplicaFields]]:
    """(index, fields) of every job in ``jobs`` (index -> job) as each finishes, ``workers`` at a time.
    The data is given on the CPU; each worker uses torch's threads divided among the workers."""
    threads = max(1, torch.get_num_threads() // workers)
    context = torch.multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context, initializer=_start,
                               initargs=(train, test_x, test_y, str(device), threads, switches()))
    try:
        running = {pool.submit(_train, model_fn, job, recipe, loss_fn, list(profiles_dir), math, optimizer_fn,
                               scheduler_fn): k
                   for k, job in jobs.items()}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                k = running.pop(future)
                try:
                    result = future.result()  # a worker's exception is raised here, as its own
                except BrokenProcessPool:
                    raise Error(f"{_WHO}: a worker process ended before its replica was trained: each worker "
                                f"imports the main script again, so its experiment() call must be under "
                                f"`if __name__ == \"__main__\":` (or the worker ran out of memory)") from None
                yield k, result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _start(train: Tuple[torch.Tensor, torch.Tensor], test_x: torch.Tensor, test_y: torch.Tensor, device: str,
           threads: int, parent_switches: Dict[str, Any]) -> None:
    global _given
    torch.set_num_threads(threads)
    set_switches(parent_switches)  # TF32 and matmul precision as the caller set them
    where = torch.device(device)
    _given = (train[0].to(where), train[1].to(where)), test_x.to(where), test_y


def _train(model_fn: Callable, job: dict, recipe: Any, loss_fn: Callable, profiles_dir: List[str],
           math: str, optimizer_fn: Optional[Callable], scheduler_fn: Optional[Callable]) -> ReplicaFields:
    assert _given is not None, "a worker trains only after _start"
    train, test_x, test_y = _given
    return train_replica(model_fn, job, recipe, train, test_x, test_y, loss_fn, profiles_dir, math, optimizer_fn,
                         scheduler_fn)
