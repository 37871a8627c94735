"""A census of run-to-run nondeterminism in one training step: which results differ when the same
step, or the same kernel call, runs again on the same inputs, and by how many units in the last place.

Two views (docs/results/census.md holds the H100's tables):

- ``gradient_census``: the whole step (forward, loss, backward) run ``runs`` times from the same
  weights and batch; every parameter's gradient compared with the first run's. Natively this is
  what PyTorch's kernels do; under a profile (``profile="h100"``) each run is an emulation with its
  own implementation seed, so the same table says what fplab's replay draws. Both are measured by the
  same code, which is what makes them comparable.
- ``kernel_census`` (native only): every aten operation of one step recorded with copies of its
  inputs, then each called again ``runs`` times on those copies and its outputs compared with the
  recorded ones. A kernel that differs here differs on its own, not because its inputs did.

A row's ``differing`` is the largest share of elements that differ from the first run in any one
later run; ``runs_differing`` how many of the later runs differ at all; the ulp columns are over
every differing element of every later run (ulps counted on the format's ordered integer line, so
-0 and +0 are one apart and values across zero count every step between).
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .._core import Error
from ._native import ATEN_REDUCTIONS

#: the integer type of each floating dtype's bit pattern, for ulp distances
_BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}

#: aten operations whose outputs are random by design (dropout masks, initialisers): not kernels
#: whose order could vary, so not replayed
_RANDOM = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "randperm", "exponential")

#: names of convolution_backward's three outputs
_CONV_BACKWARD_OUTPUTS = ("dgrad", "wgrad", "bias_grad")


@dataclass
class CensusRow:
    """One compared tensor: a parameter's gradient, or one output of one kernel call."""

    name: str  #: "layer 3 conv(16->32, 3x3, s1, p1) weight" or "convolution_backward wgrad #4"
    shape: Tuple[int, ...]
    inputs: str = ""  #: the kernel's input shapes ("" for gradients)
    elements: int = 0
    differing: float = 0.0  #: the largest share of elements differing from run 0 in one later run
    runs_differing: int = 0  #: later runs with any difference
    runs: int = 0  #: later runs compared
    ulp_max: int = 0
    ulp_median: float = 0.0

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "inputs": self.inputs, "elements": self.elements,
                "differing": self.differing, "runs_differing": self.runs_differing, "runs": self.runs,
                "ulp_max": self.ulp_max, "ulp_median": self.ulp_median}


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise distance of two tensors of one floating dtype on its ordered integer line (int64).
    NaNs of either side count as the largest distance."""
    if a.dtype != b.dtype or a.dtype not in _BITS:
        raise Error(f"fplab.torch.census: cannot count ulps between {a.dtype} and {b.dtype}")
    bits = _BITS[a.dtype]
    width = torch.iinfo(bits).bits

    def ordered(t: torch.Tensor) -> torch.Tensor:
        i = t.contiguous().view(bits).to(torch.int64)
        magnitude = i & ((1 << (width - 1)) - 1)
        return torch.where(i < 0, -magnitude - 1, magnitude)  # -0 one below +0

    distance = (ordered(a) - ordered(b)).abs()
    nan = torch.isnan(a) | torch.isnan(b)
    return torch.where(nan & ~(torch.isnan(a) & torch.isnan(b)), torch.full_like(distance, 2**62), distance)


def _compare(row: CensusRow, first: torch.Tensor, later: Sequence[torch.Tensor]) -> CensusRow:
    row.shape, row.elements, row.runs = tuple(first.shape), first.numel(), len(later)
    differing = []  # the distances of every differing element, per later run, on the tensors' device
    for other in later:
        distance = ulp_distance(first, other).reshape(-1)
        differ = distance[distance != 0]
        if differ.numel():
            row.runs_differing += 1
            row.differing = max(row.differing, differ.numel() / max(1, row.elements))
            differing.append(differ)
    if differing:
        ordered = torch.sort(torch.cat(differing)).values
        middle = ordered.numel() // 2
        row.ulp_max = int(ordered[-1])
        row.ulp_median = float(ordered[middle]) if ordered.numel() % 2 else (int(ordered[middle - 1]) + int(ordered[middle])) / 2
    return row


@contextlib.contextmanager
def _restored(model: torch.nn.Module) -> Iterator[Dict[str, torch.Tensor]]:
    """The model's parameters and buffers (BatchNorm's running statistics) as they were, afterwards;
    yields that state."""
    state = copy.deepcopy(model.state_dict())
    try:
        yield state
    finally:
        model.load_state_dict(state)


def _default_loss(model: torch.nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    loss = getattr(model, "loss", None)  # fplab.torch.models' networks key their loss by layer
    return loss if callable(loss) else F.cross_entropy


def gradient_census(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, *,
                    profile: Optional[str] = None, runs: int = 4,
                    loss_fn: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None,
                    profiles_dir: Sequence[str] = ()) -> List[CensusRow]:
    """One training step's gradients, ``runs`` times from the same state; a row per parameter
    (named as ``model.named_parameters()``, or fplab's layer names for fplab.torch.models' networks)
    and one for the loss. ``profile``: None runs PyTorch's own kernels (in whatever deterministic or
    TF32 setting the caller chose); a profile name runs each step under ``fplab.torch.emulate(profile,
    impl_seed=run + 1)``. The model's parameters and buffers are left as they were."""
    if runs < 2:
        raise Error(f"fplab.torch.census: runs must be at least 2 (got {runs})")
    loss_fn = loss_fn or _default_loss(model)
    names = _parameter_names(model)
    results: List[Tuple[torch.Tensor, List[torch.Tensor]]] = []
    with _restored(model) as start:
        for run in range(runs):
            model.load_state_dict(start)  # BatchNorm's running statistics moved in the last run
            model.zero_grad(set_to_none=True)
            with _emulated(profile, run + 1, profiles_dir):
                loss = loss_fn(model(inputs), labels)
                loss.backward()
            grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                     for _, p in names]
            results.append((loss.detach().clone().reshape(1), grads))
        model.zero_grad(set_to_none=True)
    rows = [_compare(CensusRow("loss", ()), results[0][0], [r[0] for r in results[1:]])]
    for index, (name, _) in enumerate(names):
        rows.append(_compare(CensusRow(name, ()), results[0][1][index], [r[1][index] for r in results[1:]]))
    return rows


def _parameter_names(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Parameter]]:
    tensors = getattr(model, "fplab_tensors", None)
    parameters = getattr(model, "fplab_parameters", None)
    if callable(tensors) and callable(parameters):
        return [(name, p) for (name, _, _), (p, _) in zip(tensors(), parameters())]
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


@contextlib.contextmanager
def _emulated(profile: Optional[str], impl_seed: int, profiles_dir: Sequence[str]) -> Iterator[None]:
    if profile is None:
        yield
        return
    from ._mode import emulate
    with emulate(profile, impl_seed=impl_seed, profiles_dir=list(profiles_dir)):
        yield


@dataclass
class _Call:
    func: Any
    args: Any
    kwargs: Any
    outputs: List[Optional[torch.Tensor]]


class _KernelRecorder(TorchDispatchMode):
    """Every aten call with a floating output, with copies of its inputs and outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[_Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (PyTorch's signature)
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        keep = not func._schema.is_mutable and not any(word in name for word in _RANDOM)
        copied = (tree_map(_copy, args), tree_map(_copy, kwargs)) if keep else None
        out = func(*args, **kwargs)
        if keep:
            outputs = _floating_outputs(out)
            if outputs:
                self.calls.append(_Call(func, copied[0], copied[1], [t.detach().clone() if t is not None else None for t in outputs]))
        return out


def _copy(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _floating_outputs(out: Any) -> List[Optional[torch.Tensor]]:
    """The outputs as a flat list (None where an output is not a floating tensor); empty if none is."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    flat = [t if isinstance(t, torch.Tensor) and t.dtype in _BITS else None for t in items]
    return flat if any(t is not None for t in flat) else []


def kernel_census(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, *, runs: int = 4,
                  loss_fn: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None,
                  every_kernel: bool = False) -> List[CensusRow]:
    """Every aten kernel of one native training step called again ``runs - 1`` times on copies of
    its recorded inputs. Rows: each output of each reduction kernel (ATEN_REDUCTIONS: GEMMs,
    convolutions and their backward, sums, softmax, norms, losses), and of any other kernel whose
    output differed (all of them with ``every_kernel``), in the order of the step."""
    if runs < 2:
        raise Error(f"fplab.torch.census: runs must be at least 2 (got {runs})")
    loss_fn = loss_fn or _default_loss(model)
    recorder = _KernelRecorder()
    with _restored(model):
        model.zero_grad(set_to_none=True)
        with recorder:
            loss_fn(model(inputs), labels).backward()
        model.zero_grad(set_to_none=True)
    rows: List[CensusRow] = []
    seen: Dict[str, int] = {}
    for call in recorder.calls:
        name = call.func.overloadpacket.__name__
        later = []
        for _ in range(runs - 1):
            again = call.func(*tree_map(_copy, call.args), **tree_map(_copy, call.kwargs))
            later.append(_floating_outputs(again))
        shapes = " ".join("x".join(map(str, a.shape)) for a in _tensors(call.args))
        for position, first in enumerate(call.outputs):
            if first is None:
                continue
            role = _CONV_BACKWARD_OUTPUTS[position] if name == "convolution_backward" else \
                (f"out{position}" if len(call.outputs) > 1 else "")
            label = f"{name} {role}".strip()
            seen[label] = seen.get(label, 0) + 1
            row = _compare(CensusRow(f"{label} #{seen[label]}", (), shapes), first,
                           [outs[position] for outs in later])
            if every_kernel or name in ATEN_REDUCTIONS or row.runs_differing:
                rows.append(row)
    return rows


def _tensors(tree: Any) -> List[torch.Tensor]:
    found: List[torch.Tensor] = []
    tree_map(lambda v: found.append(v) if isinstance(v, torch.Tensor) else None, tree)
    return found


def set_torch_mode(mode: str, tf32: str) -> None:
    """PyTorch's switches as the census and experiments/reveal_torch.py measure under them: ``mode``
    "default" or "deterministic" (torch.use_deterministic_algorithms with cudnn.deterministic),
    ``tf32`` "off" or "on" (cuBLAS and cuDNN alike), or "conv" (cuDNN's convolutions only: PyTorch's
    own default); cudnn.benchmark off, so that the kernels are chosen by heuristics, as a default
    training run chooses them."""
    if mode not in ("default", "deterministic") or tf32 not in ("off", "on", "conv"):
        raise Error(f"fplab.torch.census: mode must be default or deterministic and tf32 off, on or conv "
                    f"(got {mode!r}, {tf32!r})")
    torch.backends.cuda.matmul.allow_tf32 = tf32 == "on"
    torch.backends.cudnn.allow_tf32 = tf32 != "off"
    torch.backends.cudnn.benchmark = False
    deterministic = mode == "deterministic"
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic


def format_table(rows: Sequence[CensusRow], differing_only: bool = False) -> str:
    """A Markdown table of census rows."""
    lines = ["| tensor | shape | inputs | elements | differing (largest share in a run) | runs differing | "
             "ulps max | ulps median |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if differing_only and not row.runs_differing:
            continue
        shape = "x".join(map(str, row.shape)) or "scalar"
        lines.append(f"| {row.name} | {shape} | {row.inputs} | {row.elements} | {100 * row.differing:.2f}% | "
                     f"{row.runs_differing}/{row.runs} | {row.ulp_max} | {row.ulp_median:g} |")
    return "\n".join(lines)
