"""What a handler is: how fplab.torch emulates one torch function, and what its result must be.

A handler names the function's parameters (as a stub with the same signature) and a ``run(em, op,
p)`` that gets the call's arguments by name, defaults filled in, and returns the result or a
Native saying why the call runs natively. Arguments that do not fit the parameters run natively
too, so that PyTorch itself answers them (with its own error where they are wrong).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict

import torch

from ._native import Native

Run = Callable[[Any, str, Dict[str, Any]], Any]


@dataclass(frozen=True)
class Handler:
    """One torch function's parameters and what fplab.torch does with a call of it."""

    parameters: inspect.Signature
    run: Run

    def __call__(self, em: Any, op: str, args: tuple, kwargs: dict) -> Any:
        """The emulated result of func(*args, **kwargs), or a Native."""
        try:
            bound = self.parameters.bind(*args, **kwargs)
        except TypeError:
            return Native("arguments fplab.torch does not understand")
        bound.apply_defaults()
        return self.run(em, op, bound.arguments)


def handles(parameters: Callable[..., Any]) -> Callable[[Run], Handler]:
    """Decorator: the Handler of a function whose parameters are those of the stub ``parameters``."""
    return lambda run: Handler(inspect.signature(parameters), run)


def owned(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself if it owns its memory, else a copy: what an autograd.Function returns must
    not be a view made inside it, or an in-place operation on it (ReLU(inplace=True)) is refused."""
    return tensor if tensor._base is None else tensor.clone()
