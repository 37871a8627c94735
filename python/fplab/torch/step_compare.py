"""One training step of a model, layer by layer: PyTorch's own kernels against fplab's emulation of
them under a profile, compared bit for bit. Which kernels of a real step does a profile reproduce?

>>> from fplab.torch.step_compare import compare_step, format_rows
>>> rows = compare_step(net, x, y, "h100-torch:deterministic")   # PyTorch's step is the reference
>>> print(format_rows(rows))

The model is cut into its layers (fplab.torch.models' networks by their layers, an nn.Sequential by
its children). The reference step runs them in turn, each on the previous one's output, then the
loss, then the backward pass layer by layer from the loss down, recording every layer's input,
output, output gradient, input gradient and parameter gradients. The emulated step is measured in
two ways:

- ``isolated``: every layer (and the loss) run once more under ``emulate(profile)`` on the
  *reference's* input and output gradient, so that each row says whether that one layer's kernels
  are reproduced, whatever the layers before it did;
- ``chained``: the whole step emulated from the same weights and batch, as training would run it;
  a row differs when that layer or any before it (forward) or after it (backward) differs.

``reference`` is None for PyTorch's own kernels (in whatever deterministic or TF32 setting the
caller chose: fplab.torch.census.set_torch_mode), or another profile, which makes the comparison one
between two emulations. Parameters and buffers are left as they were.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .._core import Error
from .census import _restored, ulp_distance

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class StepRow:
    """One compared tensor of one layer."""

    view: str  #: "isolated" or "chained"
    layer: str  #: "layer 3 conv(16->32, 3x3, s1, p1)", or "loss"
    quantity: str  #: "output", "input gradient", "weight gradient", "bias gradient", "loss", "logits gradient"
    shape: Tuple[int, ...]
    elements: int
    differing: int  #: elements whose bits differ from the reference
    ulp_max: int

    def as_dict(self) -> dict:
        return {"view": self.view, "layer": self.layer, "quantity": self.quantity, "shape": list(self.shape),
                "elements": self.elements, "differing": self.differing, "ulp_max": self.ulp_max}


@dataclass
class _Layer:
    name: str
    module: torch.nn.Module
    index: Optional[int]  #: the fplab layer index (its noise key), None outside fplab's networks
    parameter_names: List[str]


@dataclass
class _Record:
    """What one pass computed: per layer, input, output, output gradient, input gradient (None for the
    first layer) and parameter gradients; the loss and the logits' gradient."""

    inputs: List[torch.Tensor]
    outputs: List[torch.Tensor]
    grad_outputs: List[Optional[torch.Tensor]]
    grad_inputs: List[Optional[torch.Tensor]]
    grad_params: List[List[torch.Tensor]]
    loss: torch.Tensor
    grad_logits: torch.Tensor


def _layers(model: torch.nn.Module) -> Tuple[List[_Layer], Loss]:
    blocks = getattr(model, "blocks", None)
    if blocks is not None and hasattr(model, "indices") and hasattr(model, "descriptions"):
        layers = []
        for index, description, block in zip(model.indices, model.descriptions, blocks):
            names = ["gamma", "beta"] if isinstance(block, torch.nn.BatchNorm2d) else ["weight", "bias"]
            layers.append(_Layer(f"layer {index} {description}", block, index,
                                 names[:len(list(block.parameters(recurse=False)))]))
        return layers, model.loss
    if isinstance(model, torch.nn.Sequential):
        layers = [_Layer(f"{name} {type(child).__name__}", child, None,
                         [n for n, _ in child.named_parameters(recurse=True)])
                  for name, child in model.named_children()]
        return layers, F.cross_entropy
    raise Error("fplab.torch.step_compare: the model must be one of fplab.torch.models' networks or an "
                "nn.Sequential (its layers are compared one by one)")


@contextlib.contextmanager
def _keyed(layer: _Layer) -> Iterator[None]:
    if layer.index is None:
        yield
        return
    from ._keys import layer as fplab_layer
    with fplab_layer(layer.index):
        yield


def _forward(layer: _Layer, x: torch.Tensor, first: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """(input as a leaf, output) of one layer. ``first``: no layer before it has parameters, so that
    training computes no gradient of its input (and runs no kernel for one)."""
    leaf = x.detach().requires_grad_(not first and x.is_floating_point())
    with _keyed(layer):
        return leaf, layer.module(leaf)


def _backward(layer: _Layer, leaf: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
              first: bool) -> Tuple[Optional[torch.Tensor], List[torch.Tensor]]:
    params = list(layer.module.parameters(recurse=True))
    wrt = params if first else [leaf] + params
    if not wrt:
        return None, []
    with _keyed(layer):
        grads = torch.autograd.grad(out, wrt, grad_out, allow_unused=True)
    grads = [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, wrt)]
    return (None, grads) if first else (grads[0], grads[1:])


def _loss(loss_fn: Loss, logits: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    leaf = logits.detach().requires_grad_(True)
    loss = loss_fn(leaf, labels)
    (grad,) = torch.autograd.grad(loss, [leaf])
    return loss.detach(), grad


def _firsts(layers: List[_Layer]) -> List[bool]:
    """Per layer, whether no layer before it has parameters (its input gradient is never computed)."""
    firsts, seen = [], False
    for layer in layers:
        firsts.append(not seen)
        seen = seen or any(True for _ in layer.module.parameters())
    return firsts


def _chained(layers: List[_Layer], loss_fn: Loss, x: torch.Tensor, labels: torch.Tensor) -> _Record:
    """The step as training runs it, one layer at a time: each layer on the last one's output."""
    leaves, outputs, firsts = [], [], _firsts(layers)
    for position, layer in enumerate(layers):
        leaf, out = _forward(layer, x, firsts[position])
        leaves.append(leaf)
        outputs.append(out)
        x = out.detach()
    loss, grad = _loss(loss_fn, x, labels)
    grad_logits = grad
    grad_outputs: List[Optional[torch.Tensor]] = [None] * len(layers)  # None below the last gradient
    grad_inputs: List[Optional[torch.Tensor]] = [None] * len(layers)
    grad_params: List[List[torch.Tensor]] = [[] for _ in layers]
    for position in reversed(range(len(layers))):
        grad_outputs[position] = grad
        grad_inputs[position], grad_params[position] = _backward(layers[position], leaves[position],
                                                                  outputs[position], grad, firsts[position])
        if grad_inputs[position] is None:  # nothing below takes a gradient
            break
        grad = grad_inputs[position]
    return _Record([leaf.detach() for leaf in leaves], [out.detach() for out in outputs], grad_outputs,
                   grad_inputs, grad_params, loss, grad_logits)


def _isolated(layers: List[_Layer], loss_fn: Loss, reference: _Record, labels: torch.Tensor) -> _Record:
    """Every layer on the reference's input and output gradient: each layer's own kernels alone. In
    the order of a training step (every forward, the loss, every backward from the last layer), so
    that each operation takes the noise key (step, position) it takes in the reference's step."""
    firsts = _firsts(layers)
    forwards = [_forward(layer, reference.inputs[position], firsts[position]) for position, layer in enumerate(layers)]
    loss, grad_logits = _loss(loss_fn, reference.outputs[-1], labels)
    grad_inputs: List[Optional[torch.Tensor]] = [None] * len(layers)
    grad_params: List[List[torch.Tensor]] = [[] for _ in layers]
    for position in reversed(range(len(layers))):  # a first layer without parameters takes nothing
        leaf, out = forwards[position]
        grad_inputs[position], grad_params[position] = _backward(layers[position], leaf, out,
                                                                  reference.grad_outputs[position], firsts[position])
    return _Record(reference.inputs, [out.detach() for _, out in forwards], reference.grad_outputs, grad_inputs,
                   grad_params, loss, grad_logits)


@contextlib.contextmanager
def _under(profile: Optional[str], impl_seed: int, profiles_dir: Sequence[str]) -> Iterator[None]:
    if profile is None:
        yield
        return
    from ._mode import emulate
    with emulate(profile, impl_seed=impl_seed, profiles_dir=list(profiles_dir), watch="always"):
        yield


def _row(view: str, layer: str, quantity: str, reference: torch.Tensor, other: torch.Tensor) -> StepRow:
    if reference.shape != other.shape:
        raise Error(f"fplab.torch.step_compare: {layer} {quantity}: shapes {tuple(reference.shape)} and "
                    f"{tuple(other.shape)} differ")
    distance = ulp_distance(reference.detach(), other.detach()).reshape(-1)
    differing = int((distance != 0).sum())
    return StepRow(view, layer, quantity, tuple(reference.shape), reference.numel(), differing,
                   int(distance.max()) if differing else 0)


def _rows(view: str, layers: List[_Layer], reference: _Record, other: _Record) -> List[StepRow]:
    rows = []
    for position, layer in enumerate(layers):
        if reference.outputs[position].is_floating_point():
            rows.append(_row(view, layer.name, "output", reference.outputs[position], other.outputs[position]))
    rows.append(_row(view, "loss", "loss", reference.loss.reshape(1), other.loss.reshape(1)))
    rows.append(_row(view, "loss", "logits gradient", reference.grad_logits, other.grad_logits))
    for position in reversed(range(len(layers))):
        layer = layers[position]
        if reference.grad_inputs[position] is not None:
            rows.append(_row(view, layer.name, "input gradient", reference.grad_inputs[position],
                             other.grad_inputs[position]))
        for name, ref, got in zip(layer.parameter_names, reference.grad_params[position], other.grad_params[position]):
            rows.append(_row(view, layer.name, f"{name} gradient", ref, got))
    return rows


def compare_step(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, profile: str, *,
                 impl_seed: int = 0, reference: Optional[str] = None, reference_seed: int = 0,
                 views: Sequence[str] = ("isolated", "chained"), profiles_dir: Sequence[str] = ()) -> List[StepRow]:
    """Rows of every layer's output, input gradient and parameter gradients, the loss and the logits'
    gradient: how many elements of the step under ``emulate(profile, impl_seed)`` differ in their bits
    from the ``reference`` step (None: PyTorch's own kernels), in each of ``views``."""
    unknown = [view for view in views if view not in ("isolated", "chained")]
    if unknown:
        raise Error(f"fplab.torch.step_compare: unknown view '{unknown[0]}' (known: isolated, chained)")
    layers, loss_fn = _layers(model)
    if not layers:
        raise Error("fplab.torch.step_compare: the model has no layers")
    rows: List[StepRow] = []
    with _restored(model) as start:
        with _under(reference, reference_seed, profiles_dir):
            recorded = _chained(layers, loss_fn, inputs, labels)
        for view in views:
            model.load_state_dict(start)  # BatchNorm's running statistics moved in the last pass
            with _under(profile, impl_seed, profiles_dir):
                other = _isolated(layers, loss_fn, recorded, labels) if view == "isolated" else \
                    _chained(layers, loss_fn, inputs, labels)
            rows += _rows(view, layers, recorded, other)
    return rows


def format_rows(rows: Sequence[StepRow]) -> str:
    """A Markdown table: one line per (layer, quantity), a column per view."""
    views = list(dict.fromkeys(row.view for row in rows))
    keyed = {}
    for row in rows:
        keyed.setdefault((row.layer, row.quantity), {})[row.view] = row
    lines = ["| layer | tensor | elements | " + " | ".join(f"{view}: differing (ulps max)" for view in views) + " |",
             "|---|---|---|" + "---|" * len(views)]
    for (layer, quantity), by_view in keyed.items():
        first = next(iter(by_view.values()))
        cells = []
        for view in views:
            row = by_view.get(view)
            cells.append("" if row is None else ("identical" if not row.differing else
                                                 f"{row.differing} ({row.ulp_max})"))
        lines.append(f"| {layer} | {quantity} | {first.elements} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
