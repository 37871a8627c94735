"""Division by a count with one answer on every device: the correctly rounded float32 quotient.

PyTorch's CUDA kernel divides a tensor by a Python number (or a one-element CPU tensor) as a
multiplication by the number's reciprocal (BinaryDivTrueKernel.cu: "if the second operand is a
CPU scalar, compute a * reciprocal(b)"); its CPU kernel divides float32 (only bfloat16 and half
take that shortcut there). For a count that is not a power of two, x / n and x * (1/n) differ in
the last bit of some results, and the C++ layers divide. So the emulated operations divide by a
tensor of the count on x's own device, which every kernel divides element by element. Every
tensor divided here is a reduction's result or a row of logits: the copy is small.
"""

from __future__ import annotations

import torch


def divided(x: torch.Tensor, count) -> torch.Tensor:
    """x / count, each element correctly rounded (count: a number)."""
    return torch.div(x, torch.full_like(x, count))
