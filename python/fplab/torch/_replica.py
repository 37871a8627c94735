"""One replica of fplab.torch.experiment, trained and evaluated as models/trainer.cpp does it.

``torch.manual_seed(algo_seed)`` and then ``model_fn(algo_seed)`` (the initial weights; dropout
and any other torch draw follow from that seed), the training examples in fplab's order for the
epoch (fplab._core.epoch_order of the algo seed, or the order seed of the ``order`` variant), every
step inside one ``fplab.torch.emulate(profile, impl_seed)`` entered again per step (or PyTorch's
own kernels for the ``native`` profile), fplab's SGD or Adam (fplab.torch.models.Optimizer:
models/optimizer.cpp's arithmetic), and the test set predicted in batches of 200 under the
emulation's evaluation keys, as fplab.torch.models.predict does. The caller's torch random state
is restored afterwards.

The result is a plain tuple (ReplicaFields), so that a worker process can send it back; the
caller makes it a fplab._core.ReplicaRecord.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from .. import _core
from .._core import Error
from ._mode import emulate
from ._native_run import NativeMode
from .models import FplabNet, Optimizer

_EVALUATION_BATCH = 200  # models/trainer.cpp's predict()
_WHO = "fplab.torch.experiment"


class ReplicaFields(NamedTuple):
    """fplab._core.ReplicaRecord's constructor arguments, in its order."""

    profile: str
    variant: str
    replica: int
    algo_seed: int
    impl_seed: int
    test_accuracy: float
    train_loss: float
    seconds: float
    predictions: np.ndarray
    weights: np.ndarray
    buffers: np.ndarray


def record(fields: ReplicaFields) -> Any:
    return _core.ReplicaRecord(*fields)


def train_replica(model_fn: Callable[[int], nn.Module], job: dict, recipe: Any,
                  train: Tuple[torch.Tensor, torch.Tensor], test_x: torch.Tensor, test_y: torch.Tensor,
                  loss_fn: Callable, profiles_dir: Sequence[str], math: str,
                  optimizer_fn: Optional[Callable] = None, scheduler_fn: Optional[Callable] = None) -> ReplicaFields:
    """Job ``job`` (one of fplab._core.Experiment.jobs()) trained and evaluated; train and test_x
    on the training device, test_y (the labels, for the accuracy) on the CPU. ``optimizer_fn``: the
    caller's torch.optim optimizer of the trained parameters instead of fplab's; ``scheduler_fn``:
    the caller's learning-rate scheduler of that optimizer, stepped at the end of every epoch."""
    started = time.monotonic()
    x, y = train
    device = x.device
    n = len(x)
    size = n if recipe.batch == 0 else min(recipe.batch, n)
    batches = (n + size - 1) // size
    native = job["profile"] == _core.NATIVE_PROFILE
    profile = job["profile"] + (":deterministic" if job["deterministic"] else "")
    algo_seed = job["algo_seed"]
    order_seed = job["order_seed"] or algo_seed  # 0: the algo seed orders the data (TrainConfig)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(algo_seed)
        model = model_fn(algo_seed)
        if job["flip_weight"] >= 0:
            _flip_lowest_bit(model, job["flip_weight"])
        model.to(device)
        trained = [p for p in model.parameters() if p.requires_grad]
        # Weight decay on weights, not on biases or normalisation parameters (fplab's layers: one dimension).
        if optimizer_fn is not None:
            optimizer: Any = _CallersOptimizer(optimizer_fn(trained), scheduler_fn)
        else:
            optimizer = Optimizer([(p, p.dim() > 1) for p in trained], recipe.optimizer, recipe.lr, recipe.momentum,
                                  recipe.weight_decay, decay_every=recipe.lr_decay_every,
                                  decay_factor=recipe.lr_decay_factor)
        if native:
            mode: Any = NativeMode(job["deterministic"])
        else:
            mode = emulate(profile, job["impl_seed"], profiles_dir=profiles_dir, math=math)
        model.train()
        train_loss = 0.0
        step = 0
        for epoch in range(recipe.epochs):
            order = torch.from_numpy(np.asarray(_core.epoch_order(n, order_seed, epoch), dtype=np.int64))
            loss_sum = 0.0
            for b in range(batches):
                chosen = order[b * size:(b + 1) * size].to(device)
                for p in trained:  # set, not added to zeros: 0 + g would turn -0 into +0 (as the C++)
                    p.grad = None
                if isinstance(model, FplabNet):  # fplab's dropout masks are keyed by the step, as the C++'s
                    model.set_step(step)
                step += 1
                with mode:
                    loss = loss_fn(model(x[chosen]), y[chosen])
                    loss.backward()
                optimizer.step(epoch)
                loss_sum += float(loss.detach())
            train_loss = loss_sum / batches  # the last epoch's mean, in double (fplab train's)
            if isinstance(optimizer, _CallersOptimizer):
                optimizer.end_epoch(train_loss)
        if native:
            predictions = _predict(model, test_x, lambda b: NativeMode(job["deterministic"]))
        else:
            predictions = _predict(model, test_x, lambda b: emulate(
                profile, job["impl_seed"], call=((recipe.epochs - 1) << 24) + b, profiles_dir=profiles_dir,
                math=math))
    accuracy = int((torch.from_numpy(predictions.astype(np.int64)) == test_y).sum()) / len(predictions)
    weights = _flat(model.parameters())
    buffers = _flat(b for b in model.buffers() if b.is_floating_point())
    return ReplicaFields(job["profile"], job["variant"], job["replica"], algo_seed, job["impl_seed"], accuracy,
                         train_loss, time.monotonic() - started, predictions, weights, buffers)


class _CallersOptimizer:
    """A torch.optim optimizer behind fplab's Optimizer.step(epoch) (the epoch is fplab's decay
    schedule's business, which a caller's optimizer does not follow), with the caller's scheduler
    if any, stepped at the end of every epoch (ReduceLROnPlateau with the epoch's mean training
    loss)."""

    def __init__(self, optimizer: Any, scheduler_fn: Optional[Callable] = None) -> None:
        self.optimizer = checked_optimizer(optimizer)
        self.scheduler = None if scheduler_fn is None else checked_scheduler(scheduler_fn(optimizer))

    def step(self, epoch: int) -> None:
        self.optimizer.step()

    def end_epoch(self, mean_loss: float) -> None:
        if self.scheduler is None:
            return
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            self.scheduler.step(mean_loss)
        else:
            self.scheduler.step()


def checked_optimizer(optimizer: Any) -> Any:
    """What optimizer_fn returned, if it is a torch.optim optimizer; else a one-line fplab.Error."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"{_WHO}: optimizer_fn must return a torch.optim.Optimizer, not {type(optimizer).__name__}")
    return optimizer


def checked_scheduler(scheduler: Any) -> Any:
    """What scheduler_fn returned, if it is a scheduler (a step() and a state_dict()); else a one-line fplab.Error."""
    if not (callable(getattr(scheduler, "step", None)) and callable(getattr(scheduler, "state_dict", None))):
        raise Error(f"{_WHO}: scheduler_fn must return a torch.optim.lr_scheduler scheduler of the optimizer it is "
                    f"given, not {type(scheduler).__name__}")
    return scheduler


def _predict(model: nn.Module, x: torch.Tensor, mode_of_batch: Callable[[int], Any]) -> np.ndarray:
    """The first largest output of every test input, in evaluation mode, batch b under
    mode_of_batch(b): an emulation keyed with call 2^62 + (epoch << 24) + b as models/trainer.cpp's
    predict() (fplab.torch.models.predict), or PyTorch's own mode."""
    model.eval()
    out = []
    for b, start in enumerate(range(0, len(x), _EVALUATION_BATCH)):
        with torch.no_grad(), mode_of_batch(b):
            logits = model(x[start:start + _EVALUATION_BATCH])
        if logits.dim() != 2:
            raise Error(f"{_WHO}: the model must give (batch, classes) outputs, not shape {tuple(logits.shape)}")
        out.append(logits.argmax(dim=1).cpu().numpy().astype(np.uint8))
    model.train()
    return np.concatenate(out)


def _flip_lowest_bit(model: nn.Module, index: int) -> None:
    """The ``flip`` variant: the lowest mantissa bit of initial weight ``index`` (modulo their count)
    over every parameter in the model's order, as models/trainer.cpp's initial_model()."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    if total == 0:
        raise Error(f"{_WHO}: the flip variant needs a model with parameters")
    at = index % total
    for p in params:
        if at < p.numel():
            if not p.is_contiguous():
                raise Error(f"{_WHO}: the flip variant needs contiguous parameters")
            with torch.no_grad():
                flat = p.data.view(-1)
                flat[at:at + 1].view(torch.int32).bitwise_xor_(1)
            return
        at -= p.numel()


def _flat(tensors: Any) -> np.ndarray:
    parts = [t.detach().reshape(-1).to(torch.float32).cpu().numpy() for t in tensors]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
