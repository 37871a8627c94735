"""fplab.torch: any PyTorch model under a hardware profile's reduction orders (CPU and CUDA tensors).

>>> import fplab.torch
>>> with fplab.torch.emulate("h100", impl_seed=3):       # a profile name or path; "NAME:deterministic"
...     loss = torch.nn.functional.cross_entropy(model(x), y)
...     loss.backward()
>>> print(fplab.torch.coverage())    # what ran through fplab (op kind, schedule), what natively and why

Inside ``emulate``, the matmul-like operations (F.linear, torch.matmul and @, mm, bmm, addmm,
baddbmm, F.conv2d) and the reductions training takes (sum and mean over dimensions, softmax,
log_softmax, cross_entropy, nll_loss, batch_norm, global average pooling) of float32 tensors run
through fplab's C++ engine (CPU tensors) or its CUDA kernels (CUDA tensors, the same bits; what
they cannot give those bits for makes a round trip to the C++ engine) with the profile's schedule
and arithmetic for each op kind: forward ``fwd``, input
gradients ``dgrad``, weight gradients ``wgrad``, bias gradients ``bias_grad``, ``bn_stats``,
``softmax``, ``loss``. Everything else runs natively and is listed by coverage(); what may reduce
among it is warned about once (NativeOpWarning). Nondeterministic steps draw from the same
counter-based stream as the C++ training, keyed by (impl_seed, operation, step, tile):
docs/python.md, "Your own PyTorch model under a profile".
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ImportError as _error:  # pragma: no cover - depends on the environment
    _why = "fplab.torch needs PyTorch (Debian: apt-get install python3-torch; else pip install torch)"
    raise ImportError(_why) from _error

from ._coverage import Coverage, CoverageEntry, NativeOpWarning
from .experiment import Recipe, Results, experiment
from ._keys import layer
from ._mode import Emulation, coverage, emulate
from ._table import OP_KINDS, Table

__all__ = ["Coverage", "CoverageEntry", "Emulation", "NativeOpWarning", "OP_KINDS", "Recipe", "Results", "Table",
           "coverage", "emulate", "experiment", "layer"]
