"""fplab.torch.emulate: PyTorch operations intercepted and run through fplab under a profile.

Two PyTorch modes work together while an emulation is active:

- a ``TorchFunctionMode`` sees every call at the level of torch's Python API (F.linear,
  F.conv2d, torch.matmul, x.sum(), F.cross_entropy, ...). The operations fplab.torch knows
  (HANDLERS) run as ``torch.autograd.Function``s whose forward and backward send each reduction
  through the C++ engine with the op kind it is (fwd; dgrad, wgrad, bias_grad in the backward;
  softmax, loss, bn_stats). Everything else runs natively and is listed (_native.classify).
- a ``TorchDispatchMode`` watches the aten operations underneath. A reduction there (aten.mm,
  aten.sum, aten.convolution_backward, ...) that runs outside an emulated operation — inside a
  native operation such as torch.einsum, or in autograd's backward of one — is listed in coverage
  and warned about, so that nothing that reduces runs natively unseen. It changes nothing. It
  watches the first training step whole (forward, backward and whatever runs before the next
  forward: the optimiser) and then steps off, since every aten operation it sees costs a call into
  Python (a fifth of a GPU step's host time); ``watch="always"`` keeps it on for every step.

The model itself is not touched: modules, parameters and optimisers run unchanged.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from .._core import Error
from . import _ops_conv, _ops_matmul, _ops_norm, _ops_reduce
from ._coverage import Coverage, CoverageRecorder
from ._engines import Engines
from ._handler import Handler
from ._keys import Site, StepCounter
from ._math import MATH
from ._native import ATEN_REDUCTIONS, Native, classify, has_floating_tensor, op_name
from ._table import Table, load_table

HANDLERS: Dict[Callable, Handler] = {
    **_ops_matmul.HANDLERS,
    **_ops_conv.HANDLERS,
    **_ops_reduce.HANDLERS,
    **_ops_norm.HANDLERS,
}

#: a torch function's name, handler and what classify() says of it, by function: resolving a
#: name costs more than running most of the functions the optimiser calls (p.grad, add_, ...)
_known: Dict[Callable, Tuple[str, Optional[Handler], Optional[Native]]] = {}
_BACKWARD = ("torch.Tensor.backward", "torch.autograd.grad")  # what starts autograd's backward pass
_active: Optional["Emulation"] = None  # the emulation whose modes are on the stacks now
_latest: Optional["Emulation"] = None  # the one coverage() reports: active, else the last one


class Emulation:
    """A profile's table applied to the PyTorch operations run inside ``with`` (emulate()).

    The same object may be entered again (one step per ``with``, say): its step counter, and so
    its noise keys, go on where they were. ``coverage()`` reports everything it ran so far.
    """

    def __init__(self, table: Table, impl_seed: int, call: int, math: str = "torch", watch: str = "first-step") -> None:
        self.table = table
        self.impl_seed = impl_seed
        self.math = math  # "torch" or "libm": whose exp and log (_math.py)
        self.watch = watch  # "first-step" or "always": how long the aten watch stays on
        self.steps = StepCounter(call)
        self._watched_step = False  # a whole training step ran under the aten watch
        self._watching = False  # the aten watch is on the dispatch stack now
        self._thread = 0  # the thread that entered the emulation
        self._coverage = CoverageRecorder()
        self.engine = Engines(table, impl_seed, self._coverage)  # one engine per device
        self._internal = 0  # > 0 while fplab.torch itself runs torch operations
        self._native: List[str] = []  # the native operations running now, innermost last
        self._modes: Optional[tuple] = None

    @property
    def profile(self) -> str:
        """The profile's name."""
        return self.table.profile

    @property
    def mode(self) -> str:
        """"default" or "deterministic": which of the profile's tables."""
        return self.table.mode

    @property
    def call(self) -> int:
        """The current training step (the noise key's call)."""
        return self.steps.call

    def coverage(self) -> Coverage:
        """What ran through fplab and what ran natively, so far."""
        return self._coverage.snapshot()

    def __repr__(self) -> str:
        return f"Emulation({str(self.table)!r}, impl_seed={self.impl_seed}, call={self.call})"

    # --- what the handlers use -----------------------------------------------------------------

    def next_site(self) -> Site:
        """The Site of a forward operation about to be emulated."""
        call = self.steps.call
        site = self.steps.next_site(evaluation=not torch.is_grad_enabled())
        if self.steps.call != call:  # a new training step: the one before it was watched whole
            self._watched_step = True
        return site

    def internal(self) -> "_Internal":
        """While fplab.torch runs torch operations of its own: neither mode looks at them.

        Where this emulation's modes are the innermost ones (the usual case), they are also taken
        off PyTorch's mode stacks meanwhile: an emulated operation runs a few dozen torch and aten
        operations of its own, and each one passing through a Python mode costs tens of
        microseconds, more than the GPU takes for most of them (docs/results/torch_emulate.md)."""
        return _Internal(self)

    def backward(self) -> "_Internal":
        """Around an emulated operation's backward: internal, and the next forward opens a new step."""
        self.steps.backward_seen()
        return _Internal(self)

    # --- the modes' work -----------------------------------------------------------------------

    def _function(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        # aten operations reach the function mode too when the aten watch runs them (torch 1.13);
        # that watch lists what matters among them.
        if self._internal or isinstance(func, torch._ops.OpOverload):
            return func(*args, **kwargs)
        try:
            name, handler, native = _known[func]
        except (KeyError, TypeError):  # TypeError: an unhashable callable
            name = op_name(func)
            handler, native = HANDLERS.get(func), classify(name)
            with contextlib.suppress(TypeError):
                _known[func] = name, handler, native
        if handler is not None:
            with self.internal():
                result = handler(self, name, args, kwargs)
            if self._watching and self._watched_step and self.watch == "first-step":
                self._stop_watching()
            if not isinstance(result, Native):
                return result
            self._coverage.native(name, result.reason, result.warn)
            return self._run_native(func, args, kwargs, None)  # already said why
        if native is not None:
            self._coverage.native(name, native.reason, native.warn)
        return self._run_native(func, args, kwargs, name)

    def _run_native(self, func: Callable, args: tuple, kwargs: dict, name: Optional[str]) -> Any:
        """func run by PyTorch; aten reductions under it are listed as inside ``name`` (None: not listed)."""
        self._native.append(name)
        try:
            return func(*args, **kwargs)
        finally:
            self._native.pop()

    def _aten(self, func: Any, args: tuple, kwargs: dict) -> None:
        if self._internal or func.overloadpacket.__name__ not in ATEN_REDUCTIONS:
            return
        where = self._native[-1] if self._native else "user code"
        if where is None or not has_floating_tensor(args, kwargs):
            return
        if where in _BACKWARD:
            where = "the backward pass (autograd's gradient of a native operation)"
        self._coverage.native(str(func), f"a reduction run natively inside {where}", warn=True)

    def _stop_watching(self) -> None:
        """Takes the aten watch off the dispatch stack where it is the innermost mode there (else it
        stays on: another mode entered inside the emulation sits on top of it)."""
        dispatch_mode = self._modes[0]
        if threading.get_ident() != self._thread:
            return  # autograd's threads hold copies of the stacks: the watch ends on the entering one
        if _python_dispatch._get_current_dispatch_mode() is dispatch_mode:
            dispatch_mode.__exit__(None, None, None)
            self._watching = False

    # --- entering and leaving ------------------------------------------------------------------

    def __enter__(self) -> "Emulation":
        global _active, _latest
        if _active is not None:
            raise Error("fplab.torch.emulate: an emulation is already active (they do not nest)")
        function_mode, dispatch_mode = _FunctionMode(self), _AtenWatch(self)
        watching = self.watch == "always" or not self._watched_step
        if watching:
            dispatch_mode.__enter__()
        try:
            function_mode.__enter__()
        except BaseException:
            if watching:
                dispatch_mode.__exit__(None, None, None)
            raise
        self._modes = (dispatch_mode, function_mode)
        self._watching = watching
        self._thread = threading.get_ident()
        _active = _latest = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active
        dispatch_mode, function_mode = self._modes
        self._modes = None
        _active = None
        function_mode.__exit__(*exc)
        if self._watching:
            self._watching = False
            dispatch_mode.__exit__(*exc)


class _Internal:
    """Emulation.internal()'s context: the emulation's two modes off the current thread's mode
    stacks, as far as they are the innermost there (autograd's threads may hold neither), and back
    afterwards. A class rather than a generator-based context manager: it is entered for every
    emulated operation, some hundred times a training step, and a generator's costs several
    microseconds more each time."""

    __slots__ = ("emulation", "dispatch_mode", "function_mode")

    def __init__(self, emulation: "Emulation") -> None:
        self.emulation = emulation
        self.dispatch_mode: Any = None  # the modes taken off, put back on leaving
        self.function_mode: Any = None

    def __enter__(self) -> None:
        em = self.emulation
        em._internal += 1
        try:
            if em._internal == 1 and em._modes is not None:
                dispatch_mode, function_mode = em._modes
                if _python_dispatch._get_current_dispatch_mode() is dispatch_mode:
                    _python_dispatch._pop_mode()
                    self.dispatch_mode = dispatch_mode
                if torch.overrides._get_current_function_mode() is function_mode:
                    torch.overrides._pop_mode()
                    self.function_mode = function_mode
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.function_mode is not None:
                torch.overrides._push_mode(self.function_mode)
            if self.dispatch_mode is not None:
                _python_dispatch._push_mode(self.dispatch_mode)
        finally:
            self.emulation._internal -= 1


class _FunctionMode(TorchFunctionMode):
    """Sends every torch API call to its Emulation."""

    def __init__(self, emulation: Emulation) -> None:
        super().__init__()
        self.emulation = emulation

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.emulation._function(func, args, kwargs or {})


class _AtenWatch(TorchDispatchMode):
    """Lists aten reductions that run natively outside emulated operations; computes nothing."""

    def __init__(self, emulation: Emulation) -> None:
        super().__init__()
        self.emulation = emulation

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.emulation._aten(func, args, kwargs)
        return func(*args, **kwargs)


WATCHES = ("first-step", "always")


def emulate(profile: str, impl_seed: int = 0, *, call: int = 0, profiles_dir: Sequence[str] = (),
            math: str = "torch", watch: str = "first-step") -> Emulation:
    """Run the PyTorch code inside ``with`` under a hardware profile's reduction orders.

    ``profile``: "NAME" (fplab.profiles()), "NAME:deterministic" (the table of the framework's
    deterministic switch), or a path to a profile .toml file (docs/profiles.md). ``impl_seed``: the
    run of the nondeterministic hardware (the same seed, the same bits; another seed, another
    run). ``call``: the training step the first forward pass is (0; set it to resume a run).
    ``profiles_dir``: folders searched for profiles before the shipped ones. ``math``: the exp and
    log of softmax and the losses and the losses' formulas, "torch" (PyTorch's own: cross_entropy as
    log_softmax then nll_loss) or "libm" (the C library's exp and log and the C++ layers' formulas, as
    ``fplab train`` computes them: needed to reproduce a ``fplab train`` run bit for bit).
    ``watch``: how long the aten watch lists reductions that run natively underneath (coverage()):
    "first-step" (the first training step whole, then it steps off: each aten operation it sees
    costs a call into Python) or "always" (every step; for a model whose steps differ).

    >>> with fplab.torch.emulate("h100", impl_seed=3):
    ...     loss = torch.nn.functional.cross_entropy(model(x), y)
    ...     loss.backward()
    >>> print(fplab.torch.coverage())
    """
    if not isinstance(impl_seed, int) or isinstance(impl_seed, bool) or not 0 <= impl_seed < 1 << 64:
        raise Error(f"fplab.torch.emulate: impl_seed must be a whole number from 0 to 2^64 - 1 (got {impl_seed!r})")
    if math not in MATH:
        raise Error(f"fplab.torch.emulate: math must be one of {', '.join(MATH)} (got {math!r})")
    if watch not in WATCHES:
        raise Error(f"fplab.torch.emulate: watch must be one of {', '.join(WATCHES)} (got {watch!r})")
    return Emulation(load_table(profile, profiles_dir), impl_seed, call, math, watch)


def coverage() -> Coverage:
    """What the active emulation, or else the last one, ran through fplab and what natively (and why)."""
    return _latest.coverage() if _latest is not None else Coverage([])
