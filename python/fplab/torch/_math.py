"""The elementwise exp and log of the emulated softmax, log_softmax and losses: PyTorch's own, or the
C library's that the C++ layers call.

These have no order to emulate, but two correct implementations still round differently: PyTorch's
vectorised exp (SLEEF, accurate to 1 ulp) and the C library's expf (which models/
softmax_cross_entropy.cpp calls through std::exp) differ in about one result in ten, and a softmax's
probabilities, then every gradient, follow. ``emulate(..., math="torch")`` (the default) keeps
PyTorch's; ``math="libm"`` takes the C library's (fplab._core.exp and log), as ``fplab train`` does,
which a bit-for-bit reproduction of a ``fplab train`` run needs (fplab.torch.models). On CUDA
tensors, PyTorch's CUDA exp and log differ from its CPU ones too; "libm" computes them on the host,
so that CPU and GPU runs give the same bits.
"""

from __future__ import annotations

import torch

#: The choices of emulate(..., math=).
MATH = ("torch", "libm")


def exp(em, x: torch.Tensor) -> torch.Tensor:
    """exp(x) elementwise, as the emulation ``em`` chose."""
    return em.engine.exp(x) if em.math == "libm" else torch.exp(x)


def log(em, x: torch.Tensor) -> torch.Tensor:
    """log(x) elementwise, as the emulation ``em`` chose."""
    return em.engine.log(x) if em.math == "libm" else torch.log(x)
