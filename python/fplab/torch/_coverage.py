"""What an emulation did: which operations ran through fplab with which op kind and schedule, and
which ran natively in PyTorch, and why.

Each distinct (operation, emulated, op kind, schedule, arithmetic, reason) is one entry with a
count. An operation that runs natively although it may reduce (an operation fplab.torch does not
know, a known one with arguments it does not take, an aten reduction reached outside an emulated
operation) is also warned about, once per operation and reason in a process, with a
NativeOpWarning.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from .._core import OpChoice


class NativeOpWarning(UserWarning):
    """An operation that may reduce ran natively under fplab.torch.emulate (see coverage())."""


@dataclass(frozen=True)
class CoverageEntry:
    """One kind of event: an operation emulated with an op kind, or run natively for a reason."""

    op: str  #: "torch.nn.functional.linear", "torch.Tensor.sum", "aten.mm.default", ...
    emulated: bool
    op_kind: Optional[str]  #: fwd, dgrad, wgrad, bias_grad, bn_stats, softmax, loss (emulated only)
    schedule: Optional[str]  #: the schedule's canonical text (emulated only)
    arithmetic: Optional[str]  #: "fp32/rne/fused" (emulated only)
    reason: str  #: why it ran natively ("" when emulated)
    count: int  #: how many times
    #: where an emulated reduction ran: "cpu", "cuda", or "cpu (from cuda: WHY)" when fplab's CUDA
    #: kernels cannot give the CPU engine's bits for it and the tensors made a round trip to the host
    where: str = ""


class Coverage:
    """The entries of one emulation (fplab.torch.coverage()), emulated ones first."""

    def __init__(self, entries: List[CoverageEntry]) -> None:
        self.entries: Tuple[CoverageEntry, ...] = tuple(entries)

    @property
    def emulated(self) -> List[CoverageEntry]:
        """The reductions that ran through fplab."""
        return [e for e in self.entries if e.emulated]

    @property
    def native(self) -> List[CoverageEntry]:
        """The operations that ran natively, each with its reason."""
        return [e for e in self.entries if not e.emulated]

    def ops(self, emulated: Optional[bool] = None) -> Set[str]:
        """The names of the operations (only the emulated or only the native ones, if asked)."""
        return {e.op for e in self.entries if emulated is None or e.emulated == emulated}

    def __len__(self) -> int:
        return len(self.entries)

    def __str__(self) -> str:
        lines = []
        for e in self.entries:
            what = f"{e.op_kind:<9} {e.schedule}  {e.arithmetic}  [{e.where}]" if e.emulated else f"native: {e.reason}"
            lines.append(f"{e.op:<40} {e.count:>6}  {what}")
        return "\n".join(lines) if lines else "(nothing ran under fplab.torch.emulate)"

    def __repr__(self) -> str:
        return f"Coverage({len(self.emulated)} emulated, {len(self.native)} native entries)"


_warned: Set[Tuple[str, str]] = set()  # (op, reason) already warned about in this process


def _caller_level() -> int:
    """The stacklevel of warnings.warn that names the first frame outside fplab.torch and torch."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        path = frame.f_code.co_filename.replace(os.sep, "/")
        if "/fplab/torch/" not in path and "/torch/" not in path:
            return level
        frame, level = frame.f_back, level + 1
    return 1


class CoverageRecorder:
    """Counts the events of one emulation."""

    def __init__(self) -> None:
        self._counts: Dict[Tuple[str, bool, Optional[str], Optional[str], Optional[str], str, str], int] = {}

    def emulated(self, op: str, op_kind: str, choice: OpChoice, where: str = "cpu") -> None:
        """``op`` ran a reduction of kind ``op_kind`` through fplab with ``choice``, ``where``."""
        key = (op, True, op_kind, choice.schedule.text, choice.arithmetic.text, "", where)
        self._counts[key] = self._counts.get(key, 0) + 1

    def native(self, op: str, reason: str, warn: bool) -> None:
        """``op`` ran natively because of ``reason``; ``warn``: once, with a NativeOpWarning."""
        key = (op, False, None, None, None, reason, "")
        self._counts[key] = self._counts.get(key, 0) + 1
        if warn and (op, reason) not in _warned:
            _warned.add((op, reason))
            warnings.warn(f"fplab.torch: {op} ran natively: {reason}", NativeOpWarning, stacklevel=_caller_level())

    def snapshot(self) -> Coverage:
        """The entries so far, emulated first, then by operation name."""
        entries = [CoverageEntry(*key[:6], count=count, where=key[6]) for key, count in self._counts.items()]
        entries.sort(key=lambda e: (not e.emulated, e.op, e.op_kind or "", e.reason))
        return Coverage(entries)
