"""Which table of which hardware profile an emulation follows.

A profile is named as on the command line (``fplab train --profile``): ``"NAME"`` or
``"NAME:default"`` for the table the framework picks by default, ``"NAME:deterministic"`` for the
one its deterministic switch picks, or a path to a ``.toml`` file, optionally followed by one of
those two modes. Names are looked up along the same search path (``profiles_dir`` folders,
``$FPLAB_HW_PROFILES``, the shipped profiles: docs/profiles.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .. import _core
from .._core import Error, LayerRule, OpChoice

#: The operation kinds of a profile's table, in the order of profiles/op_table.hpp.
OP_KINDS = ("fwd", "dgrad", "wgrad", "bias_grad", "bn_stats", "softmax", "loss")
MODES = ("default", "deterministic")


#: A layer as layer rules see it: ("conv", in channels, out channels, square kernel, stride, input
#: height, images), ("linear", in features, out features, 0, 0, 0, rows multiplied: the batch,
#: times the positions of an input of more dimensions) or ("bn", channels, 0, 0, 0, input height (1
#: without one), batch); 0 where a convolution's kernel or stride is not square, so that no rule naming one
#: matches it.
Layer = Tuple[Union[str, int], ...]


@dataclass(frozen=True)
class Table:
    """One table of a hardware profile: per operation kind the schedule and arithmetic."""

    profile: str  #: the profile's name
    mode: str  #: "default" or "deterministic"
    choices: Dict[str, OpChoice]  #: {op kind: OpChoice}
    layer_rules: List[LayerRule] = field(default_factory=list)  #: per-layer exceptions, first match wins
    #: how a convolution's input gradient adds up: "col2im" or "direct" (profiles::ConvDgrad)
    conv_dgrad: str = "col2im"
    _chosen: Dict[Tuple[str, Optional[Layer]], OpChoice] = field(default_factory=dict, repr=False, compare=False)

    def choice(self, op_kind: str, layer: Optional["Layer"] = None) -> OpChoice:
        """What ``op_kind`` uses in ``layer`` (None: outside a linear, convolution or batch norm layer): the
        first layer rule that matches it and sets the kind, else the table's entry
        (profiles::OpTable::choice)."""
        key = (op_kind, layer)
        chosen = self._chosen.get(key)
        if chosen is None:
            chosen = self.choices[op_kind]
            if layer is not None:
                for rule in self.layer_rules:
                    if op_kind in rule.ops and rule.matches(*layer):
                        chosen = rule.ops[op_kind]
                        break
            self._chosen[key] = chosen
        return chosen

    def conv_wgrad(self, layer: Optional["Layer"]) -> str:
        """How ``layer``'s weight gradient is computed: "winograd" or "gemm", the first layer rule
        that matches it and says (profiles::OpTable::conv_wgrad)."""
        if layer is not None:
            for rule in self.layer_rules:
                if rule.conv_wgrad is not None and rule.matches(*layer):
                    return rule.conv_wgrad
        return "gemm"

    def batch_norm(self, layer: Optional["Layer"]) -> str:
        """A batch norm's arithmetic in training: "cudnn", "cudnn-nchw", "cudnn-nchw-backward" or "fplab",
        the first layer rule that matches it and says (profiles::OpTable::batch_norm)."""
        if layer is not None:
            for rule in self.layer_rules:
                if rule.batch_norm is not None and rule.matches(*layer):
                    return rule.batch_norm
        return "fplab"

    def every_choice(self) -> List[OpChoice]:
        """The table's entries and every rule's."""
        return list(self.choices.values()) + [c for rule in self.layer_rules for c in rule.ops.values()]

    @property
    def nondeterministic(self) -> bool:
        """True if some operation kind draws implementation noise (atomics, shuffles, sr)."""
        return any(choice.nondeterministic for choice in self.every_choice())

    def __str__(self) -> str:
        return f"{self.profile}:{self.mode}"


def _is_path(text: str) -> bool:
    """As profiles::is_hw_profile_path: a '/', a .toml ending, or an existing file."""
    return "/" in text or text.endswith(".toml") or os.path.isfile(text)


def load_table(spec: str, profiles_dir: Sequence[str] = ()) -> Table:
    """The table that ``spec`` ("NAME", "NAME:deterministic", "PATH.toml[:MODE]") names.

    Raises fplab.Error with one line for anything that is not a known profile and mode.
    """
    if not isinstance(spec, str) or not spec:
        raise Error(f"fplab.torch.emulate: profile must be a profile name or .toml path (got {spec!r})")
    name, mode = spec, "default"
    head, colon, tail = spec.rpartition(":")
    if colon and tail in MODES:
        name, mode = head, tail
    elif colon and not _is_path(spec):
        raise Error(f"fplab.torch.emulate: profile takes NAME, NAME:default or NAME:deterministic (or a .toml path), "
                    f"not '{spec}'")
    try:
        profile = _core.find_profile(name, list(profiles_dir))
    except Error as error:
        raise Error(f"fplab.torch.emulate: {error}") from None
    choices = profile.default if mode == "default" else profile.deterministic
    return Table(profile.name, mode, dict(choices), list(profile.layer_rules[mode]), profile.conv_dgrad[mode])
