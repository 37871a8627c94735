"""fplab's own models in PyTorch, and ``fplab train``'s recipe around them: a ``fplab train`` run
reproduced under fplab.torch.emulate, bit for bit.

>>> import fplab.torch.models as fm
>>> run = fm.train("h100", impl_seed=3, model="mlp", subset=256, batch=64, epochs=1)
>>> run.weights      # every parameter, fplab's layout and order: --save-weights's 'parameters'
>>> fm.predict(run.net, fplab._core.load_fashion_mnist(), "h100", 3)   # its 'test_predictions'

Everything that is not a reduction is taken from the C++ code that ``fplab train`` runs, through
fplab._core, rather than written again: the initial weights (``initial_model``: the algorithmic
seed's draws, in fplab's layout), the training subset and the epoch orders (``training_examples``,
``epoch_order``), the normalised images and their augmentation (``Dataset.batch``), the dropout
masks (``dropout_mask``). The network is plain PyTorch (nn.Linear, nn.Conv2d, nn.BatchNorm2d,
F.cross_entropy), so its reductions go through fplab.torch.emulate; to meet the C++ model's bits:

- every layer runs inside ``fplab.torch.layer(index)`` with the C++ layer's index (ReLU, pooling and
  flatten count as layers there), and the loss with the last layer's index, as models/trainer.cpp
  computes it after the forward pass: the noise keys are the C++ ones;
- the emulation takes ``math="libm"``: the softmax's exp is the C library's, as the C++ layer's;
- ReLU is ``x > 0 ? x : 0`` (PyTorch's relu keeps -0 and NaN; the C++ makes both +0);
- the optimiser (``Optimizer``) is models/optimizer.cpp's SGD and Adam, one float32 rounding per
  operation in the same order (torch.optim's Adam orders its arithmetic otherwise).

Max-pooling (first maximum of each 2 x 2 window), flattening, the bias and BatchNorm's elementwise
arithmetic round the same in both. python/tests/test_torch_crosscheck.py holds the result to
``fplab train --save-weights``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import _core
from .._core import Error
from ._divide import divided
from ._keys import layer
from ._mode import emulate


# --- the layers -------------------------------------------------------------------------------


class ReLU(nn.Module):
    """models/relu.hpp: y = x > 0 ? x : 0 (so -0 and NaN give +0); the gradient passes where x > 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype))


class MaxPool(nn.Module):
    """models/max_pool.hpp: 2 x 2, stride 2, the first maximum of each window; planes smaller than
    2 x 2 pass through unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.shape[2] < 2 or x.shape[3] < 2 else F.max_pool2d(x, 2)


class GlobalAvgPool(nn.Module):
    """models/global_avg_pool.hpp: the mean of every plane, (B, C, H, W) -> (B, C) (a bn_stats sum)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


class Dropout(nn.Module):
    """models/dropout.cpp: the C++ masks (algorithmic seed, layer index, training step), kept values
    times float32(1 / (1 - p)); nothing in evaluation. ``step`` is set by the training loop."""

    def __init__(self, p: float, index: int, algo_seed: int) -> None:
        super().__init__()
        self.p, self.index, self.algo_seed, self.step = p, index, algo_seed, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p <= 0:
            return x
        keep = _core.dropout_mask(self.algo_seed, self.index, self.step, self.p, x.numel())
        kept = np.float32(1.0 / (1.0 - self.p))
        scale = torch.from_numpy(np.where(keep, kept, np.float32(0)).astype(np.float32)).reshape(x.shape)
        return x * scale.to(x.device)


_CONV = re.compile(r"conv2d\((\d+)->(\d+), (\d+)x(\d+), stride (\d+), pad (\d+)\)")
_LINEAR = re.compile(r"linear\((\d+)->(\d+)\)")
_BATCHNORM = re.compile(r"batchnorm\((\d+)\)")


def _param(array: np.ndarray) -> nn.Parameter:
    return nn.Parameter(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)))


class FplabNet(nn.Module):
    """One of fplab's models (mlp, small_cnn, small_cnn_bn, medium_cnn) as PyTorch modules, from the
    layer list and initial weights of fplab._core.initial_model (``dropout``: the model's p).

    ``blocks[i]`` is the C++ model's layer ``indices[i]``; forward() runs each inside
    ``fplab.torch.layer(index)``, and ``loss()`` the softmax cross-entropy with the last layer's
    index, so that under fplab.torch.emulate every reduction has the C++ model's noise key.
    """

    def __init__(self, layers: Sequence[dict], algo_seed: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.blocks = nn.ModuleList()
        self.indices: List[int] = []
        self.descriptions: List[str] = []
        self.decayed: List[bool] = []  # Parameter::weight_decay of each parameter, in fplab's order
        for entry in layers:
            description, index = entry["layer"], int(entry["index"])
            params = entry["parameters"]
            linear, conv, bn = _LINEAR.fullmatch(description), _CONV.fullmatch(description), \
                _BATCHNORM.fullmatch(description)
            if linear:
                module: nn.Module = nn.Linear(int(linear[1]), int(linear[2]))
                module.weight = _param(params[0]["value"].T)  # fplab (in, out) -> (out, in)
                module.bias = _param(params[1]["value"])
            elif conv:
                cin, cout, kh, kw, stride, pad = (int(g) for g in conv.groups())
                module = nn.Conv2d(cin, cout, (kh, kw), stride=stride, padding=pad)
                # fplab (C*kh*kw, C_out), rows (c, i, j) -> (C_out, C, kh, kw)
                module.weight = _param(params[0]["value"].T.reshape(cout, cin, kh, kw))
                module.bias = _param(params[1]["value"])
            elif bn:
                module = nn.BatchNorm2d(int(bn[1]), eps=1e-5, momentum=0.1)  # models/batch_norm.hpp's
                module.weight = _param(params[0]["value"])
                module.bias = _param(params[1]["value"])
                module.running_mean.copy_(torch.from_numpy(entry["buffers"][0]))
                module.running_var.copy_(torch.from_numpy(entry["buffers"][1]))
            elif description == "relu":
                module = ReLU()
            elif description == "maxpool(2x2)":
                module = MaxPool()
            elif description == "flatten":
                module = nn.Flatten()
            elif description == "global_avg_pool":
                module = GlobalAvgPool()
            elif description.startswith("dropout("):
                module = Dropout(dropout, index, algo_seed)  # the spec's p: the description rounds it
            else:
                raise Error(f"fplab.torch.models: no PyTorch layer for fplab's '{description}'")
            if not (linear or conv or bn) and params:
                raise Error(f"fplab.torch.models: unexpected parameters in '{description}'")
            self.decayed += [bool(p["weight_decay"]) for p in params]
            self.blocks.append(module)
            self.indices.append(index)
            self.descriptions.append(description)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, block in zip(self.indices, self.blocks):
            with layer(index):
                x = block(x)
        return x

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean softmax cross-entropy, keyed as models/trainer.cpp's (the last layer's index)."""
        with layer(self.indices[-1]):
            return F.cross_entropy(logits, labels)

    def set_step(self, step: int) -> None:
        """The training step the next forward pass is (the dropout masks' key)."""
        for block in self.blocks:
            if isinstance(block, Dropout):
                block.step = step

    def fplab_parameters(self) -> List[Tuple[nn.Parameter, bool]]:
        """Every parameter in fplab's order (per layer: weight and bias, or gamma and beta), with
        whether weight decay applies to it."""
        params = [p for block in self.blocks for p in block.parameters(recurse=False)]
        return list(zip(params, self.decayed))

    def fplab_weights(self) -> np.ndarray:
        """Every parameter in fplab's layout and order, as one float32 array: what ``fplab train
        --save-weights`` stores as 'parameters'."""
        parts = []
        for block in self.blocks:
            if isinstance(block, nn.Linear):
                parts += [block.weight.detach().t(), block.bias.detach()]
            elif isinstance(block, nn.Conv2d):
                parts += [block.weight.detach().reshape(block.weight.shape[0], -1).t(), block.bias.detach()]
            elif isinstance(block, nn.BatchNorm2d):
                parts += [block.weight.detach(), block.bias.detach()]
        return _flat(parts)

    def fplab_buffers(self) -> np.ndarray:
        """The BatchNorm running statistics in fplab's order ('buffers' of --save-weights)."""
        return _flat([t for block in self.blocks if isinstance(block, nn.BatchNorm2d)
                      for t in (block.running_mean, block.running_var)])

    def fplab_tensors(self) -> List[Tuple[str, int, int]]:
        """(name, offset, size) of every parameter within fplab_weights(): "layer 1 linear(784->128) weight"."""
        out, at = [], 0
        for index, description, block in zip(self.indices, self.descriptions, self.blocks):
            names = ("gamma", "beta") if isinstance(block, nn.BatchNorm2d) else ("weight", "bias")
            for name, p in zip(names, block.parameters(recurse=False)):
                out.append((f"layer {index} {description} {name}", at, p.numel()))
                at += p.numel()
        return out


def _flat(tensors: Iterable[torch.Tensor]) -> np.ndarray:
    parts = [t.detach().cpu().contiguous().reshape(-1).numpy() for t in tensors]
    return np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, np.float32)


def build(model: str = "mlp", *, hidden: Sequence[int] = (128,), kernel: int = 3, dropout: float = 0.0,
          algo_seed: int = 1, input_shape: Sequence[int] = (1, 28, 28), classes: int = 10,
          flip_weight: int = -1) -> FplabNet:
    """fplab's model ``model`` with the initial weights ``fplab train --algo-seed algo_seed`` starts from
    (``classes`` outputs: a data set's ``Dataset.classes``)."""
    layers = _core.initial_model(model, list(hidden), kernel, dropout, algo_seed, list(input_shape), classes,
                                 flip_weight)
    return FplabNet(layers, algo_seed, dropout)


# --- the optimiser ----------------------------------------------------------------------------


class Optimizer(torch.optim.Optimizer):
    """models/optimizer.cpp's SGD and Adam: elementwise float32, one rounding per operation, in the
    C++ loop's order:

    - sgd: v = mu·v + (g + decay·w); w = w - lr·v
    - adam: g' = g + decay·w; m = b1·m + (1 - b1)·g'; v = b2·v + (1 - b2)·g'·g';
      w = w - lr·(m / c1) / (sqrt(v / c2) + eps), c1 = float32(1 - b1^t), c2 = float32(1 - b2^t) from
      doubles, t the optimiser's step count;

    decay = weight_decay where the parameter takes it (weights, not biases or BatchNorm's), else 0;
    lr = float32(lr · decay_factor^(epoch // decay_every)) (step decay; decay_every = 0: none).
    ``params``: (parameter, decayed) pairs, as FplabNet.fplab_parameters() gives them. A CPU
    parameter is updated by NumPy, a CUDA one by PyTorch on its device, with the same bits.
    """

    def __init__(self, params: Sequence[Tuple[torch.Tensor, bool]], kind: str = "adam", lr: float = 0.001,
                 momentum: float = 0.9, weight_decay: float = 0.0, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, decay_every: int = 0, decay_factor: float = 0.1) -> None:
        if kind not in ("sgd", "adam"):
            raise Error(f"fplab.torch.models.Optimizer: kind must be sgd or adam (got {kind!r})")
        groups = [{"params": [p], "decayed": bool(decayed)} for p, decayed in params]
        super().__init__(groups, dict(lr=lr))
        self.kind, self.lr, self.momentum, self.weight_decay = kind, lr, momentum, weight_decay
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.decay_every, self.decay_factor = decay_every, decay_factor
        self.steps = 0

    def lr_at(self, epoch: int) -> float:
        """OptimizerSpec::lr_at, in double."""
        if self.decay_every == 0:
            return self.lr
        return self.lr * math.pow(self.decay_factor, float(epoch // self.decay_every))

    @torch.no_grad()
    def step(self, epoch: int = 0) -> None:  # type: ignore[override]
        """One update of every parameter from its gradient; ``epoch`` picks the learning rate."""
        f32 = np.float32
        self.steps += 1
        lr = f32(self.lr_at(epoch))
        for group in self.param_groups:
            (p,) = group["params"]
            if p.grad is None:
                raise Error("fplab.torch.models.Optimizer: a parameter has no gradient (run backward first)")
            decay = f32(self.weight_decay) if group["decayed"] else f32(0)
            if p.device.type == "cpu":
                self._update_on_host(p.detach().numpy(), p.grad.detach().contiguous().numpy(), self.state[p], lr,
                                     decay)
            else:
                self._update_on_device(p.detach(), p.grad.detach(), self.state[p], lr, decay)

    def _update_on_host(self, w: np.ndarray, g: np.ndarray, state: dict, lr: np.float32, decay: np.float32) -> None:
        """The C++ update in NumPy float32, in place: one rounding per operation, in its order."""
        f32, one = np.float32, np.float32(1)
        if self.kind == "sgd":
            if "v" not in state:
                state["v"] = np.zeros_like(w)
            v = state["v"]
            mu = f32(self.momentum)
            v[...] = mu * v + (g + decay * w)
            w -= lr * v
        else:
            if "m" not in state:
                state["m"], state["v"] = np.zeros_like(w), np.zeros_like(w)
            m, v = state["m"], state["v"]
            b1, b2 = f32(self.beta1), f32(self.beta2)
            c1 = f32(1 - math.pow(self.beta1, float(self.steps)))
            c2 = f32(1 - math.pow(self.beta2, float(self.steps)))
            gj = g + decay * w
            m[...] = b1 * m + (one - b1) * gj
            v[...] = b2 * v + (one - b2) * gj * gj
            w -= lr * (m / c1) / (np.sqrt(v / c2) + f32(self.eps))

    def _update_on_device(self, w: torch.Tensor, g: torch.Tensor, state: dict, lr: np.float32,
                          decay: np.float32) -> None:
        """The same update with PyTorch's operations on the parameter's device (CUDA), no host copy:
        the same float32 operations in the same order, the scalars the same float32 values (a
        Python float holding one is converted exactly). Divisions take a tensor divisor (CUDA
        multiplies by a Python number's reciprocal: _divide.py), no add/sub takes an alpha (that
        would fuse a multiply-add), and CUDA's sqrt is correctly rounded."""
        f32, one = np.float32, np.float32(1)
        if self.kind == "sgd":
            if "v" not in state:
                state["v"] = torch.zeros_like(w)
            v = state["v"]
            v.mul_(float(f32(self.momentum))).add_(g + w * float(decay))
            w.sub_(v * float(lr))
        else:
            if "m" not in state:
                state["m"], state["v"] = torch.zeros_like(w), torch.zeros_like(w)
            m, v = state["m"], state["v"]
            b1, b2 = f32(self.beta1), f32(self.beta2)
            c1 = f32(1 - math.pow(self.beta1, float(self.steps)))
            c2 = f32(1 - math.pow(self.beta2, float(self.steps)))
            gj = g + w * float(decay)
            m.mul_(float(b1)).add_(gj * float(one - b1))
            v.mul_(float(b2)).add_((gj * float(one - b2)) * gj)
            step = divided(m, float(c1)) * float(lr)
            root = torch.sqrt(divided(v, float(c2))) + float(f32(self.eps))
            w.sub_(torch.div(step, root))


# --- fplab train's loop -----------------------------------------------------------------------


def predict(net: FplabNet, data: _core.Dataset, profile: str = "cpu-seq", impl_seed: int = 1, *, epoch: int = 0,
            split: str = "test", batch: int = 200, profiles_dir: Sequence[str] = (),
            device: Optional[Union[str, torch.device]] = None) -> np.ndarray:
    """The predicted classes (uint8) of a split in evaluation mode under the profile, as
    models/trainer.cpp's predict() after epoch ``epoch`` (0-based: a run of E epochs ends with
    epoch E - 1): batches of ``batch``, batch b keyed with call 2^62 + (epoch << 24) + b, the first
    largest logit of each row. These are ``fplab train --save-weights``'s 'test_predictions'.
    ``device``: where the images go (default: the network's device).
    """
    if device is None:
        device = next(net.parameters()).device
    images = data.images(split)
    out = []
    was_training = net.training
    net.eval()
    try:
        for b, start in enumerate(range(0, len(images), batch)):
            # A no_grad pass adds 2^62 to the emulation's call (fplab.torch._keys).
            em = emulate(profile, impl_seed, call=(epoch << 24) + b, profiles_dir=profiles_dir, math="libm")
            x = torch.from_numpy(images[start:start + batch].copy()).to(device)  # the data set's are read-only
            with torch.no_grad(), em:
                out.append(net(x).argmax(dim=1).cpu().numpy().astype(np.uint8))
    finally:
        net.train(was_training)
    return np.concatenate(out) if out else np.zeros(0, np.uint8)


@dataclass
class Run:
    """What train() returns."""

    net: FplabNet
    weights: np.ndarray  #: every parameter, fplab's layout and order ('parameters' of --save-weights)
    buffers: np.ndarray  #: BatchNorm running statistics ('buffers')
    losses: List[float] = field(default_factory=list)  #: the loss of every step (float32 values)
    train_loss: float = 0.0  #: the mean loss of the last epoch's batches, in double (fplab train's)
    steps: int = 0


def train(profile: str = "cpu-seq", impl_seed: int = 1, *, model: str = "mlp", hidden: Sequence[int] = (128,),
          kernel: int = 3, dropout: float = 0.0, optimizer: str = "adam", lr: float = 0.001, momentum: float = 0.9,
          weight_decay: float = 0.0, decay_every: int = 0, decay_factor: float = 0.1, epochs: int = 1,
          batch: int = 64, subset: int = 0, imbalance_class: int = -1, imbalance_percent: float = 100.0,
          augment_pad: int = 0, flip: bool = False, algo_seed: int = 1, data: Optional[_core.Dataset] = None,
          profiles_dir: Sequence[str] = (), device: Union[str, torch.device] = "cpu",
          on_step: Optional[Callable[[int, FplabNet], None]] = None) -> Run:
    """``fplab train --profile PROFILE --impl-seed IMPL_SEED ...`` in PyTorch under fplab.torch.emulate.

    The options are fplab train's (the defaults too: Adam, lr 1e-3, batch 64, one hidden layer of
    128); ``data`` is a fplab._core.Dataset (default: Fashion-MNIST from its Debian folder).
    ``device``: where the network and batches live ("cpu", "cuda": fplab's CUDA kernels, the same
    bits). ``on_step(step, net)`` runs after every optimiser step (1, 2, ...). The test-set evaluation
    fplab train ends with is left out (it changes no weight): predict(run.net, data, profile,
    impl_seed, epoch=epochs - 1) gives it.
    """
    if data is None:
        data = _core.load_fashion_mnist()
    examples = _core.training_examples(data.labels("train"), subset, imbalance_class, imbalance_percent, algo_seed)
    if len(examples) == 0:
        raise Error("fplab.torch.models.train: no training examples after the subset/imbalance selection")
    size = len(examples) if batch == 0 else min(batch, len(examples))
    batches = (len(examples) + size - 1) // size
    net = build(model, hidden=hidden, kernel=kernel, dropout=dropout, algo_seed=algo_seed,
                input_shape=data.images("train").shape[1:], classes=data.classes).to(device)
    net.train()
    opt = Optimizer(net.fplab_parameters(), optimizer, lr, momentum, weight_decay, decay_every=decay_every,
                    decay_factor=decay_factor)
    em = emulate(profile, impl_seed, profiles_dir=profiles_dir, math="libm")
    run = Run(net, np.zeros(0, np.float32), np.zeros(0, np.float32))
    for epoch in range(epochs):
        order = _core.epoch_order(len(examples), algo_seed, epoch)
        loss_sum = 0.0
        for b in range(batches):
            chosen = examples[order[b * size:(b + 1) * size]]
            x, y = data.batch(chosen, epoch, algo_seed, augment_pad, flip)
            net.set_step(run.steps)
            for p in net.parameters():  # the C++ sets gradients; zero_grad()'s 0 + g would make -0 +0
                p.grad = None
            with em:
                loss = net.loss(net(torch.from_numpy(x).to(device)), torch.from_numpy(y.astype(np.int64)).to(device))
                loss.backward()
            opt.step(epoch)
            run.losses.append(float(loss.detach()))
            loss_sum += float(loss.detach())
            run.steps += 1
            if on_step is not None:
                on_step(run.steps, net)
        run.train_loss = loss_sum / batches
    run.weights, run.buffers = net.fplab_weights(), net.fplab_buffers()
    return run
