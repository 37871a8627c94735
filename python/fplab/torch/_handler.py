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

    def __post_init__(self) -> None:
        kinds = {p.kind for p in self.parameters.parameters.values()}
        plain = kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD}  # no *args, **kwargs, / or *
        object.__setattr__(self, "_names", tuple(self.parameters.parameters) if plain else None)
        object.__setattr__(self, "_defaults", {n: p.default for n, p in self.parameters.parameters.items()
                                               if p.default is not inspect.Parameter.empty})

    def __call__(self, em: Any, op: str, args: tuple, kwargs: dict) -> Any:
        """The emulated result of func(*args, **kwargs), or a Native."""
        arguments = self._bound(args, kwargs)
        if arguments is None:
            return Native("arguments fplab.torch does not understand")
        return self.run(em, op, arguments)

    def _bound(self, args: tuple, kwargs: dict) -> Any:
        """The arguments by name, defaults filled in; None where they do not fit the parameters.
        Plain parameter lists are bound directly (inspect.Signature.bind costs tens of
        microseconds, and every emulated operation binds its arguments)."""
        names = self._names
        if names is not None and len(args) <= len(names) and all(k in names[len(args):] for k in kwargs):
            arguments = dict(self._defaults)
            arguments.update(zip(names, args))
            arguments.update(kwargs)
            if len(arguments) == len(names):  # every parameter has a value
                return arguments
            return None
        try:
            bound = self.parameters.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        return bound.arguments


def handles(parameters: Callable[..., Any]) -> Callable[[Run], Handler]:
    """Decorator: the Handler of a function whose parameters are those of the stub ``parameters``."""
    return lambda run: Handler(inspect.signature(parameters), run)


def owned(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself if it owns its memory, else a copy: what an autograd.Function returns must
    not be a view made inside it, or an in-place operation on it (ReLU(inplace=True)) is refused."""
    return tensor if tensor._base is None else tensor.clone()
