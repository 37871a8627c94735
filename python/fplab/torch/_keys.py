"""Implementation-noise keys of the operations of a PyTorch run, mirroring the C++ training.

The C++ models key every reduction (models/context.hpp, ``Context::key``) by
``NoiseKey{impl_seed, mix_key({layer, op kind, part}), call}``: ``layer`` the layer's index,
``call`` the training step. Here:

- ``position`` stands for ``layer``: the index of the emulated operation among the emulated
  operations of the step's forward pass (0, 1, 2, ...: a Linear, a convolution, a softmax and a
  loss each take one). Its backward reductions (dgrad, wgrad, bias_grad) reuse the forward's
  position, with their own op kind, as a C++ layer's backward does.
- ``call`` is the training step: it starts at the emulation's ``call`` (0 by default) and goes up
  by one at the first forward operation after a backward pass went through an emulated operation.
- ``part`` tells apart several reductions of one kind in one operation (BatchNorm's mean and
  variance; the matrices of a batched matmul; the groups of a grouped convolution).
- Operations run while gradients are off (``torch.no_grad``: evaluation) take keys from their own
  range, ``call = EVALUATION_CALLS + step`` with positions of their own, as the C++ evaluation
  batches do, so that evaluating between steps leaves the training bits unchanged.

``layer(index)`` replaces the counted position by an explicit one: every emulated operation that
starts inside ``with fplab.torch.layer(index):`` takes position ``index``, so that a PyTorch model
can key its operations exactly as a C++ model keys its layers (the C++ counts every layer, ReLU and
pooling included, and keys the loss with the last layer's index). Operations outside any ``layer``
block go on counting among themselves, as if the annotated ones were not there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple, Union

from .. import _core

#: models/context.hpp kEvaluationCalls: evaluation keys never meet training keys.
EVALUATION_CALLS = 1 << 62

_layers: List[int] = []  # the indices of the layer() blocks open now, innermost last


@contextlib.contextmanager
def layer(index: int) -> Iterator[None]:
    """Key the emulated operations that start inside as the C++ layer ``index`` does its reductions.

    Inside ``with fplab.torch.layer(index):`` every emulated operation takes position ``index`` in its
    noise keys (``mix_key({index, op kind, part})``), its backward reductions too, instead of the next
    counted position; blocks nest (the innermost wins) and do nothing while no emulation runs. Use it
    to reproduce a C++ model's keys (fplab.torch.models does); other code need not.
    """
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1 << 64:
        raise _core.Error(f"fplab.torch.layer: index must be a whole number from 0 to 2^64 - 1 (got {index!r})")
    _layers.append(index)
    try:
        yield
    finally:
        _layers.pop()


@dataclass(frozen=True)
class Site:
    """Where one emulated operation sits in the run: its position in the step and the step (call)."""

    position: int
    call: int
    #: the linear, convolution or batch norm layer it computes (_table.Layer), for profiles' layer rules
    layer: Optional[Tuple[Union[str, int], ...]] = None

    def op_id(self, op_kind: str, part: int = 0) -> int:
        """The noise key's op id for reduction ``part`` of kind ``op_kind``: mix_key({position, kind, part})."""
        return _core.noise_op_id(self.position, op_kind, part)


class StepCounter:
    """Hands out the Site of each emulated operation: positions within a step, and the steps."""

    def __init__(self, call: int = 0) -> None:
        if not isinstance(call, int) or isinstance(call, bool) or not 0 <= call < EVALUATION_CALLS:
            raise _core.Error(f"fplab.torch.emulate: call must be a whole number from 0 to 2^62 - 1 (got {call!r})")
        self.call = call
        self._positions = {False: 0, True: 0}  # training, evaluation
        self._backward_seen = False

    def backward_seen(self) -> None:
        """An emulated operation ran its backward: the next forward operation opens a new step."""
        self._backward_seen = True

    def next_site(self, evaluation: bool) -> Site:
        """The Site of the next forward operation (``evaluation``: gradients are off)."""
        if self._backward_seen:
            self._backward_seen = False
            self.call += 1
            self._positions = {False: 0, True: 0}
        if _layers:  # an explicit position (layer()): the counted ones go on without it
            position = _layers[-1]
        else:
            position = self._positions[evaluation]
            self._positions[evaluation] = position + 1
        return Site(position, EVALUATION_CALLS + self.call if evaluation else self.call)
