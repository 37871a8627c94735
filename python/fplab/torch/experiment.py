"""fplab.torch.experiment: the noise variants of your own PyTorch model, as ``fplab run`` runs them.

>>> import fplab.torch
>>> results = fplab.torch.experiment(make_model, (x_train, y_train), (x_test, y_test),
...                                  dict(epochs=2, batch=64, lr=1e-3), ["h100"], replicas=4,
...                                  out="results/my-model")
>>> results.summary["results"][0]["churn_mean"]

Python trains the replicas; everything else is ``fplab run``'s C++ (fplab._core.Experiment,
python/src/experiment.cpp), so that the two give the same files for the same replicas:

- the recipe's numbers are checked by the rule of the experiment TOML files, and the variants,
  profiles and replica count before anything is written (a bad one is an fplab.Error of one line);
- which seed varies in which variant, and which of the profile's tables it trains with, come from
  experiments::Experiment::replica_config (docs/experiments.md, "Variants");
- every finished replica is written atomically to OUT/replicas/ as fplab run's ``.ckpt`` files, so
  ``resume=True`` trains only what is missing;
- the statistics and every result file (summary.json, replicas.csv, per_class.csv, pairs.csv,
  report.md, report.html, figures/) are experiments::summarize and write_results.

One replica trains as models/trainer.cpp does (_replica.py). The profile ``native`` trains
replicas with PyTorch's own kernels instead, in its deterministic mode for the variants that use a
profile's deterministic table and in its default mode for the others (_native_run.py): the real
hardware's noise beside an emulated profile's, for the same recipe. ``workers`` trains several
replicas at a time in worker processes (_replica_pool.py); the bits are the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import _core
from .._core import Error
from . import _native_run
from ._native import CUDA_KERNELS
from ._replica import checked_optimizer, checked_scheduler, record, train_replica
from ._replica_pool import check_sendable, train_in_workers

VARIANTS = ("algo+impl", "algo", "impl", "control")  # the research's four; "order" and "flip" may be named too
NATIVE = _core.NATIVE_PROFILE  # the profile name of PyTorch's own kernels
_WHO = "fplab.torch.experiment"


@dataclass(frozen=True)
class Recipe:
    """How every replica trains: the ``[training]`` keys of an experiment TOML file (docs/experiments.md),
    checked by the same rule. ``batch`` 0 is the whole training set as one batch; ``optimizer`` is
    "adam" or "sgd" (``momentum``, ``weight_decay`` and the step decay of the learning rate:
    ``lr_decay_every`` epochs, times ``lr_decay_factor``)."""

    epochs: int = 1
    batch: int = 64
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    lr_decay_every: int = 0
    lr_decay_factor: float = 0.1


@dataclass
class Results:
    """What experiment() returns: where the files are, summary.json's content, the terminal table
    ``fplab run`` prints, and every replica's record (fplab._core.ReplicaRecord)."""

    out: str
    summary: dict
    table: str
    records: List[Any] = field(default_factory=list)


Data = Tuple[Any, Any]


def experiment(model_fn: Callable[[int], nn.Module], train_data: Data, test_data: Data,
               recipe: Union[Recipe, Mapping[str, Any], None], profiles: Sequence[str],
               variants: Sequence[str] = VARIANTS, replicas: int = 8, out: Optional[str] = None, *,
               name: Optional[str] = None, description: str = "", class_names: Optional[Sequence[str]] = None,
               loss_fn: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None,
               algo_seed: int = 1, impl_seed: int = 1, resume: bool = False, force: bool = False,
               device: Any = None, progress: bool = True, profiles_dir: Sequence[str] = (),
               math: str = "torch", workers: int = 1,
               optimizer_fn: Optional[Callable[[List[nn.Parameter]], torch.optim.Optimizer]] = None,
               scheduler_fn: Optional[Callable[[torch.optim.Optimizer], Any]] = None) -> Results:
    """Trains ``replicas`` replicas of every (profile, variant) and writes fplab run's result files into ``out``.

    ``model_fn(seed)`` builds the model with its initial weights (it runs after
    ``torch.manual_seed(seed)``, so a model_fn that ignores the seed still gets the seed's weights).
    ``train_data`` and ``test_data`` are pairs ``(x, y)`` of tensors (on any device) or NumPy arrays: inputs
    (converted to float32, the dtype fplab.torch emulates) and class indices 0 .. classes - 1 (at
    most 256 classes); the classes are ``class_names`` or else 0 .. the largest label.
    ``recipe`` is a Recipe or a dict of its fields. ``profiles`` are profile names or ``.toml`` paths
    (docs/profiles.md), or ``"native"``: PyTorch's own kernels on ``device``, in PyTorch's
    deterministic mode where a profile would use its deterministic table (algo, control, order,
    flip) and in its default mode for algo+impl and impl (with ``CUBLAS_WORKSPACE_CONFIG`` set to
    :4096:8 if unset; PyTorch's TF32 switches as the caller left them, recorded in the description).
    ``variants`` any of algo+impl, algo, impl, control, order, flip
    (docs/experiments.md); replica i of a variant that varies a seed uses ``algo_seed + i`` or
    ``impl_seed + i``. ``out`` defaults to results/NAME, ``name`` to model_fn's name. The folder is
    locked and marked as ``fplab run`` does it: one holding this experiment's replicas needs
    ``resume=True`` (keep those trained with the same recipe, model and data) or ``force=True``.
    ``loss_fn(output, y)`` defaults to F.cross_entropy; ``math="libm"`` takes the C library's exp
    and log, as fplab's C++ layers (fplab.torch.emulate); the description says which, per emulated
    profile. ``device`` ("cpu", the default, or "cuda[:N]") is where the replicas train: the model
    (made by model_fn on the CPU) and the data are moved there, and a CUDA device runs fplab's CUDA
    kernels, with the CPU's bits
    (docs/python.md, "On a GPU"). ``progress`` prints one line per replica on stderr.
    ``workers`` > 1 trains that many replicas at a time in worker processes on the same device (worth it
    on a GPU, which one emulated replica leaves idle much of the time); model_fn and loss_fn must
    then be defined at the top level of a module or of a script guarded by ``if __name__ ==
    "__main__":``. The replicas' bits do not depend on ``workers``.
    ``optimizer_fn(parameters)`` returns a torch.optim optimizer of the trained parameters (in the
    model's order), used instead of fplab's SGD or Adam: e.g. ``lambda ps: torch.optim.AdamW(ps,
    lr=1e-3)``. It is stepped once a batch, outside the emulation (its arithmetic is PyTorch's own
    elementwise arithmetic, as in a real run); the recipe's optimizer, lr, momentum, weight_decay and
    lr_decay keys are then not used, and the description records the optimizer. A changed
    optimizer (its class and hyperparameters) makes resume train the replicas again.
    ``scheduler_fn(optimizer)`` returns a learning-rate scheduler of the optimizer optimizer_fn made
    (torch.optim.lr_scheduler), stepped at the end of every epoch (ReduceLROnPlateau with the
    epoch's mean training loss): e.g. ``lambda opt: torch.optim.lr_scheduler.StepLR(opt, 10, 0.1)``.
    It needs optimizer_fn; it is recorded and resumed as the optimizer is, by its class and
    settings: a function inside it (LambdaLR's lambda) is not compared, so after changing one, train
    again without resume.
    """
    profiles = [profiles] if isinstance(profiles, str) else list(profiles)
    device = _device(device, emulated=any(p != NATIVE for p in profiles))
    if not callable(model_fn):
        raise Error(f"{_WHO}: model_fn must be a function of the seed that returns an nn.Module")
    if math not in ("torch", "libm"):
        raise Error(f"{_WHO}: math must be 'torch' or 'libm', not {math!r}")
    recipe = _recipe(recipe)
    train = _examples(train_data, "train_data")
    test = _examples(test_data, "test_data")
    names = _class_names(class_names, train[1], test[1])
    loss_fn = loss_fn or F.cross_entropy
    variants = [variants] if isinstance(variants, str) else list(variants)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise Error(f"{_WHO}: replicas must be a whole number, not {replicas!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise Error(f"{_WHO}: workers must be a whole number from 1, not {workers!r}")
    if optimizer_fn is not None and not callable(optimizer_fn):
        raise Error(f"{_WHO}: optimizer_fn must be a function of the parameters that returns a torch.optim optimizer")
    if scheduler_fn is not None and not callable(scheduler_fn):
        raise Error(f"{_WHO}: scheduler_fn must be a function of the optimizer that returns a scheduler")
    if scheduler_fn is not None and optimizer_fn is None:
        raise Error(f"{_WHO}: scheduler_fn needs optimizer_fn (fplab's own optimizer decays by the recipe's "
                    f"lr_decay_every and lr_decay_factor)")
    if workers > 1:
        check_sendable(model_fn=model_fn, loss_fn=loss_fn, optimizer_fn=optimizer_fn, scheduler_fn=scheduler_fn)
    native = NATIVE in profiles
    if native:
        backend = _native_run.backend(device)
        description = (description + "\n\n" if description else "") + f"Profile native: {backend}."
        _native_run.prepare_deterministic_cublas(device)  # before any GEMM of this process, if possible
    # Whose exp, log and loss each emulated profile took: a run set beside another (recipe_torch.py
    # compare) must have computed them alike.
    for profile in profiles:
        if profile != NATIVE:
            description = ((description + "\n\n" if description else "") +
                           f"Profile {profile}: emulated by fplab.torch, exp, log and the loss: {math}.")
    for seed_name, seed in (("algo_seed", algo_seed), ("impl_seed", impl_seed)):
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise Error(f"{_WHO}: {seed_name} must be a whole number from 0 to 2^63 - 1, not {seed!r}")

    first = _build(model_fn, algo_seed)
    chosen_optimizer = _optimizer_text(optimizer_fn, scheduler_fn, first)
    if chosen_optimizer:
        description = (description + "\n\n" if description else "") + f"Optimizer: {chosen_optimizer}."
    name = name or getattr(model_fn, "__name__", "") or "experiment"
    parameters = sum(p.numel() for p in first.parameters())
    spec = _core.Experiment(
        name, description=description, source=_script(), model=f"{type(first).__name__} ({parameters} parameters)",
        epochs=recipe.epochs, batch=recipe.batch, optimizer=recipe.optimizer, lr=recipe.lr, momentum=recipe.momentum,
        weight_decay=recipe.weight_decay, lr_decay_every=recipe.lr_decay_every,
        lr_decay_factor=recipe.lr_decay_factor, profiles=[str(p) for p in profiles],
        variants=[str(v) for v in variants], replicas=replicas, algo_seed=algo_seed, impl_seed=impl_seed,
        profiles_dir=list(profiles_dir))
    # What a replica file must have been trained on besides the recipe: a changed model, loss or
    # data set makes resume train the replica again.
    source = _source(first, loss_fn, math, train, test, names, backend if native else "", chosen_optimizer)
    out = out if out is not None else spec.default_out
    jobs = spec.jobs()

    folder = _core.OutputFolder(out, name, resume=resume, force=force)
    try:
        if progress and folder.leftovers_removed:
            print(f"removed {folder.leftovers_removed} temporary file(s) an interrupted run left in {out}",
                  file=sys.stderr)
        records: List[Any] = [None] * len(jobs)
        if resume:
            for k in range(len(jobs)):
                records[k] = spec.load_replica(out, k, source)
        reused = sum(r is not None for r in records)
        if progress:
            print(f"{name}: {len(profiles)} profile(s) x {len(variants)} variant(s) x {replicas} replicas -> {out}",
                  file=sys.stderr)
            if reused:
                print(f"resuming: {reused} of {len(jobs)} replicas already finished", file=sys.stderr)
        started, done = time.monotonic(), 0
        missing = {k: job for k, job in enumerate(jobs) if records[k] is None}
        for k, result in _trained(missing, workers, model_fn, recipe, train, test, loss_fn, profiles_dir, math,
                                  device, optimizer_fn, scheduler_fn):
            records[k] = record(result)
            spec.save_replica(out, k, records[k], source)
            done += 1
            if progress:
                print(_progress_line(records[k], reused + done, len(jobs), done, time.monotonic() - started),
                      file=sys.stderr)
        written = spec.write_results(records, test[1].numpy().astype(np.uint8), names, out, _command())
    finally:
        folder.release()
    results = Results(out, json.loads(written["summary"]), written["table"], records)
    if progress:
        print(f"{results.table}results in {out}/ (report.md, report.html, summary.json, *.csv, figures/)",
              file=sys.stderr)
    return results


# --- checking what the caller gave ------------------------------------------------------------


#: a scheduler's state that is its progress, not its settings
_SCHEDULER_PROGRESS = ("last_epoch", "_step_count", "_get_lr_called_within_step", "_last_lr", "verbose", "_is_initial")


def _optimizer_text(optimizer_fn: Optional[Callable], scheduler_fn: Optional[Callable], model: nn.Module) -> str:
    """The caller's optimizer in one line (its class and every hyperparameter of its groups), and
    its scheduler (class and settings), made once on a model's parameters; "" for fplab's own."""
    if optimizer_fn is None:
        return ""
    made = checked_optimizer(optimizer_fn([p for p in model.parameters() if p.requires_grad]))
    groups = [{k: v for k, v in g.items() if k != "params"} for g in made.param_groups]
    text = f"{type(made).__module__}.{type(made).__qualname__} {groups!r}"
    if scheduler_fn is None:
        return text
    scheduler = checked_scheduler(scheduler_fn(made))
    settings = {k: v for k, v in scheduler.state_dict().items() if k not in _SCHEDULER_PROGRESS}
    return f"{text}; scheduler {type(scheduler).__module__}.{type(scheduler).__qualname__} {settings!r}"


def _device(device: Any, emulated: bool) -> torch.device:
    """The device the replicas train on: the CPU, or a CUDA device (which fplab's kernels can run
    on, if a profile is emulated)."""
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError, ValueError):
        raise Error(f"{_WHO}: device must be 'cpu' or 'cuda[:N]', not {device!r}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise Error(f"{_WHO}: device must be 'cpu' or 'cuda[:N]', not {str(device)!r}")
    if emulated and not CUDA_KERNELS:
        raise Error(f"{_WHO}: device {device}: this fplab was built without its CUDA kernels")
    if not torch.cuda.is_available():
        raise Error(f"{_WHO}: device {device}: no CUDA device here (torch.cuda.is_available() is False)")
    return device


def _recipe(recipe: Union[Recipe, Mapping[str, Any], None]) -> Recipe:
    if recipe is None:
        return Recipe()
    if isinstance(recipe, Recipe):
        given = {f.name: getattr(recipe, f.name) for f in fields(Recipe)}
    elif isinstance(recipe, Mapping):
        known = [f.name for f in fields(Recipe)]
        unknown = [key for key in recipe if key not in known]
        if unknown:
            raise Error(f"{_WHO}: unknown recipe key {unknown[0]!r} (known: {', '.join(known)})")
        given = dict(recipe)
    else:
        raise Error(f"{_WHO}: recipe must be a dict or a fplab.torch.Recipe, not {type(recipe).__name__}")
    for f in fields(Recipe):
        if f.name not in given:
            continue
        value = given[f.name]
        if f.type == "str" or f.type is str:
            ok = isinstance(value, str)
            kind = "a string"
        elif f.type == "int" or f.type is int:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            kind = "a whole number"
        else:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
            kind = "a number"
        if not ok:
            raise Error(f"{_WHO}: recipe {f.name!r} must be {kind}, not {value!r}")
    return Recipe(**given)


def _examples(data: Data, what: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """(inputs as contiguous float32, labels as int64) of a pair (x, y)."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise Error(f"{_WHO}: {what} must be a pair (x, y) of tensors or arrays")
    try:
        x, y = torch.as_tensor(data[0]), torch.as_tensor(data[1])
    except (TypeError, ValueError, RuntimeError) as error:
        raise Error(f"{_WHO}: {what} must be a pair (x, y) of tensors or arrays ({error})".splitlines()[0]) from None
    x, y = x.cpu(), y.cpu()  # checked and hashed here; moved to the training device once
    if not x.is_floating_point():
        raise Error(f"{_WHO}: {what}'s inputs must be floating-point, not {x.dtype}")
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool or y.dim() != 1:
        raise Error(f"{_WHO}: {what}'s labels must be a 1-D array of class indices")
    if x.dim() < 1 or len(x) != len(y) or len(y) == 0:
        raise Error(f"{_WHO}: {what} must hold as many inputs as labels, at least one ({len(x)} and {len(y)})")
    if int(y.min()) < 0:
        raise Error(f"{_WHO}: {what}'s labels must be class indices from 0, not {int(y.min())}")
    return x.detach().to(torch.float32).contiguous(), y.detach().to(torch.int64).contiguous()


def _class_names(names: Optional[Sequence[str]], *labels: torch.Tensor) -> List[str]:
    largest = max(int(y.max()) for y in labels)
    if names is None:
        names = [str(c) for c in range(largest + 1)]
    names = [str(n) for n in names]
    if largest >= len(names):
        raise Error(f"{_WHO}: label {largest} has no class name ({len(names)} class_names)")
    if len(names) > 256:
        raise Error(f"{_WHO}: at most 256 classes (the predictions are stored as bytes), not {len(names)}")
    return names


def _build(model_fn: Callable[[int], nn.Module], seed: int) -> nn.Module:
    """model_fn(seed) after torch.manual_seed(seed); the caller's random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_fn(seed)
    if not isinstance(model, nn.Module):
        raise Error(f"{_WHO}: model_fn must return an nn.Module, not {type(model).__name__}")
    for p in model.parameters():
        if p.dtype != torch.float32 or p.device.type != "cpu":
            raise Error(f"{_WHO}: the model's parameters must be float32 on the CPU (fplab.torch emulates those)")
    return model


def _source(model: nn.Module, loss_fn: Callable, math: str, *parts: Any) -> str:
    """A SHA-256 of what a replica file depends on besides the recipe: the model's structure, the
    loss, the exp/log and every tensor of the data."""
    h = hashlib.sha256()
    h.update(repr(model).encode())
    h.update(f"{getattr(loss_fn, '__module__', '')}.{getattr(loss_fn, '__qualname__', repr(loss_fn))}".encode())
    h.update(math.encode())
    for part in parts:
        for item in part if isinstance(part, (tuple, list)) else (part,):
            if isinstance(item, torch.Tensor):
                h.update(str(tuple(item.shape)).encode() + str(item.dtype).encode())
                h.update(item.numpy().tobytes())
            else:
                h.update(repr(item).encode())
    return "torch " + h.hexdigest()


def _script() -> str:
    """The file the experiment came from, for the recipe's "file": the running script."""
    script = sys.argv[0] if sys.argv and sys.argv[0] else ""
    return os.path.abspath(script) if script and os.path.isfile(script) else "python"


def _command() -> str:
    """The command line that ran the script, shell-quoted, as fplab run records its own."""
    arguments = sys.argv if sys.argv and sys.argv[0] else sys.argv[1:]  # [''] in an interactive session
    return shlex.join([os.path.basename(sys.executable or "python3")] + list(arguments))


def _trained(jobs: dict, workers: int, model_fn: Callable[[int], nn.Module], recipe: Recipe,
             train: Tuple[torch.Tensor, torch.Tensor], test: Tuple[torch.Tensor, torch.Tensor], loss_fn: Callable,
             profiles_dir: Sequence[str], math: str, device: torch.device, optimizer_fn: Optional[Callable],
             scheduler_fn: Optional[Callable]):
    """(index, ReplicaFields) of every job as it finishes: here one after another, or in worker processes."""
    if not jobs:
        return
    if workers > 1 and len(jobs) > 1:
        yield from train_in_workers(workers, model_fn, jobs, recipe, train, test[0], test[1], loss_fn, profiles_dir,
                                    math, device, optimizer_fn, scheduler_fn)
        return
    on_device = (train[0].to(device), train[1].to(device)), test[0].to(device)  # moved once
    for k, job in jobs.items():
        yield k, train_replica(model_fn, job, recipe, on_device[0], on_device[1], test[1], loss_fn, profiles_dir, math,
                               optimizer_fn, scheduler_fn)


# --- progress --------------------------------------------------------------------------------


def _progress_line(record: Any, finished: int, total: int, trained: int, elapsed: float) -> str:
    """fplab run's line: bar, count, which replica and its accuracy, time taken and left."""
    left = elapsed / trained * (total - finished)
    bar = 30 * finished // total
    return (f"[{'=' * bar}{' ' * (30 - bar)}] {finished}/{total} replicas  {record.profile} {record.variant} "
            f"#{record.replica}: {100 * record.test_accuracy:.2f}%  {_clock(elapsed)} elapsed, ~{_clock(left)} left")


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"
