"""fplab: how the order and the format in which hardware adds numbers change the result.

The core of the fplab lab on NumPy arrays (docs/python.md has examples):

- ``round(x, format, mode)``: every element rounded to a format (fp32, bf16, fp16, e4m3, any eXmY);
- ``mx_quantize(x, element_format)``: OCP MX block scaling, 32 elements sharing an e8m0 scale;
- ``reduce(x, schedule)``: one sum in the order a schedule gives (a GPU warp tree, atomics,
  split-K, a tensor core, NumPy's pairwise sum, ...), in any format and rounding;
- ``dot(a, b, schedule)`` and ``matmul(a, b, schedule)``: the same for dot products and GEMMs;
- ``exact_sum(x, format)``: the exact sum, rounded once;
- ``Schedule(text)``: a reduction order as a value (docs/schedules.md), drawn as a tree;
- ``profiles()`` and ``profile(name)``: the hardware profiles (docs/profiles.md).

Formats and rounding modes are spelled as in docs/formats-and-rounding.md. Every error from the
C++ side is an ``fplab.Error`` (a ``ValueError``) with the one-line message the ``fplab`` command
prints. The C++ work runs without the GIL, and arrays that are already C-contiguous float64
(float32 for ``matmul``) are used in place, not copied.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as _np
from numpy.typing import ArrayLike

from . import _core
from ._core import Arithmetic, Error, OpChoice, Profile, Schedule

__version__: str = _core.__version__

__all__ = [
    "Arithmetic",
    "Error",
    "OpChoice",
    "Profile",
    "Schedule",
    "dot",
    "exact_sum",
    "matmul",
    "mx_quantize",
    "name_tree",
    "nccl_all_reduce",
    "profile",
    "profiles",
    "reduce",
    "reveal_dot",
    "reveal_sum",
    "round",
]

ScheduleLike = Union[str, Schedule]


def _schedule(schedule: ScheduleLike) -> Schedule:
    """A Schedule as it is, or parsed from its text (errors as fplab.Error)."""
    return schedule if isinstance(schedule, Schedule) else Schedule(schedule)


def round(
    x: ArrayLike,
    format: str,
    mode: str = "rne",
    saturate: bool = False,
    flush_subnormals: bool = False,
    seed: int = 0,
    *,
    saturate_infinities: bool = False,
    sr_bits: int = 64,
    random_bits: Optional[ArrayLike] = None,
) -> _np.ndarray:
    """Round every element of ``x`` to ``format``.

    Returns float64 values of ``x``'s shape (each exactly a value of the format). ``mode`` is one
    of rne, rna, rz, ru, rd, ro, sr; ``saturate`` turns overflow into the largest finite value,
    ``saturate_infinities`` infinite inputs too (OCP MX SAT, PTX .satfinite); ``flush_subnormals``
    turns results below the smallest normal into zeros. A NaN keeps its sign, and in IEEE-like
    formats the leading bits of its payload, quieted (as NumPy's casts on x86 do).

    Stochastic rounding (``sr``) gives element i its own counter-based stream (Philox, key
    ``seed``, sub-stream i): the same seed gives the same bits, whatever the array's shape. With
    ``sr_bits`` R < 64 it rounds as hardware SR units do: R random bits are added to the dropped
    bits truncated to R, and a carry rounds up. ``random_bits`` (unsigned integers below 2^R, one
    per element of x) supplies those bits instead of the stream, e.g. to replay an instruction
    whose random operand is known.

    >>> fplab.round([0.1, 1/3], "bf16")
    array([0.10009766, 0.33398438])
    >>> fplab.round([1.3, 1.3], "e2m1fn", "sr", sr_bits=4, random_bits=[5, 10])
    array([1. , 1.5])
    """
    return _core.round(
        x,
        format,
        mode,
        saturate,
        flush_subnormals,
        seed,
        saturate_infinities=saturate_infinities,
        sr_bits=sr_bits,
        random_bits=None if random_bits is None else _np.asarray(random_bits, dtype=_np.uint64),
    )


def mx_quantize(
    x: ArrayLike, element_format: str, block: int = 32, mode: str = "rne", seed: int = 0
) -> Tuple[_np.ndarray, _np.ndarray, _np.ndarray]:
    """Quantize ``x`` into OCP MX blocks (OCP Microscaling Formats v1.0) along its last axis.

    Each run of ``block`` values of a row (the last one may be shorter) shares one e8m0 scale
    X = 2^s, s = floor(log2(max |v|)) - emax of the element format, clamped to [-127, 127]; each
    value becomes the element round(v / X) in ``element_format`` (``e4m3``, ``e5m2``, ``e3m2fn``,
    ``e2m3fn``, ``e2m1fn``; any signed format of at most 8 exponent bits), rounded once in
    ``mode`` and saturating to +-max. An all-zero block gets s = -127, a block holding an infinity
    s = 127 (the infinity becomes +-max), a block holding a NaN the NaN scale (0xff): its values
    are all NaN. Stochastic rounding (``sr``) gives row r its own stream (key ``seed``, sub-stream r).

    Returns ``(scales, elements, dequantized)``: the scales' e8m0 bit patterns (uint8, the last
    axis cut to the number of blocks), the elements' values and X * element (float64, x's shape).
    Quantize a GEMM's B along K with ``mx_quantize(b.T, ...)``.

    >>> scales, elements, values = fplab.mx_quantize([1000.0, 1.0, 0.01], "e4m3")
    >>> scales.tolist(), elements.tolist(), values.tolist()
    ([128], [448.0, 0.5, 0.005859375], [896.0, 1.0, 0.01171875])
    """
    return _core.mx_quantize(x, element_format, block, mode, seed)


def reduce(
    x: ArrayLike,
    schedule: ScheduleLike,
    format: str = "fp32",
    mode: str = "rne",
    products: str = "fused",
    impl_seed: int = 0,
    *,
    flush_subnormals: bool = False,
    saturate: bool = False,
    sr_bits: int = 64,
) -> float:
    """Sum the 1-D array ``x`` in the order ``schedule`` gives, every addition rounded to ``format``.

    ``schedule`` is schedule text or a preset (docs/schedules.md: "seq", "rev", "pairwise",
    "numpy", "cuda-naive-sum(256,64)", "strided(32):seq | all:shfl_down", ...) or a Schedule.
    The values enter as they are (exactly, as float64): round them first (fplab.round) to model
    data stored in a narrower format. ``impl_seed`` chooses the run of nondeterministic steps
    (atomic, shuffle, stochastic rounding): the same seed gives the same bits. ``products`` only
    matters for dot products; it is accepted here so that a profile's arguments fit every call.
    ``sr_bits`` (with mode "sr") is the number of random bits per rounding, as in fplab.round.

    >>> fplab.reduce([1e8, 1, -1e8, 1], "seq"), fplab.reduce([1e8, 1, -1e8, 1], "rev")
    (1.0, 0.0)
    """
    arithmetic = Arithmetic(format, mode, products, flush_subnormals=flush_subnormals, saturate=saturate, sr_bits=sr_bits)
    return _core.reduce(x, _schedule(schedule), arithmetic, impl_seed)


def dot(
    a: ArrayLike,
    b: ArrayLike,
    schedule: ScheduleLike,
    format: str = "fp32",
    mode: str = "rne",
    products: str = "fused",
    impl_seed: int = 0,
    *,
    flush_subnormals: bool = False,
    saturate: bool = False,
    sr_bits: int = 64,
) -> float:
    """The dot product of 1-D arrays ``a`` and ``b``: the products a[i] * b[i] reduced by ``schedule``.

    ``products`` says how each product enters: "fused" (an FMA: consumed exactly by the addition),
    "rounded" (rounded to the format first) or "exact". Where every value is a float32 and the
    format fits in one, this is the engine's GEMM path (fast); otherwise the reference evaluator
    (the same results, slower). Other arguments as for fplab.reduce.

    >>> fplab.dot([1, 2, 3], [4, 5, 6], "seq")
    32.0
    """
    arithmetic = Arithmetic(format, mode, products, flush_subnormals=flush_subnormals, saturate=saturate, sr_bits=sr_bits)
    return _core.dot(a, b, _schedule(schedule), arithmetic, impl_seed)


def matmul(
    a: _np.ndarray,
    b: _np.ndarray,
    schedule: ScheduleLike,
    format: str = "fp32",
    mode: str = "rne",
    products: str = "fused",
    impl_seed: int = 0,
    op_id: int = 0,
    call: int = 0,
    *,
    flush_subnormals: bool = False,
    saturate: bool = False,
    sr_bits: int = 64,
) -> _np.ndarray:
    """C = A B for 2-D float32 arrays, every output's sum over K in ``schedule``'s order.

    Returns a float32 array of shape (a.shape[0], b.shape[1]); output (i, j) equals
    ``dot(a[i, :], b[:, j], ...)`` (formats wider than fp32 are rounded to nearest when stored).
    Nondeterministic steps draw from the stream keyed by (``impl_seed``, ``op_id``, ``call``,
    output tile of 4 x 64): give each operation and each call of it its own ``op_id`` and
    ``call`` to model a training step. Other arguments as for fplab.dot.

    >>> a = numpy.ones((2, 3), numpy.float32)
    >>> fplab.matmul(a, a.T.copy(), "splitk(2)")
    array([[3., 3.],
           [3., 3.]], dtype=float32)
    """
    arithmetic = Arithmetic(format, mode, products, flush_subnormals=flush_subnormals, saturate=saturate, sr_bits=sr_bits)
    return _core.matmul(a, b, _schedule(schedule), arithmetic, impl_seed, op_id, call)


def exact_sum(x: ArrayLike, format: str = "fp64", *, round_terms: bool = False) -> float:
    """The exact sum of every element of ``x``, rounded once (to nearest even) to ``format``.

    The reference every order is measured against: no schedule can do better. By default the
    elements enter as the float64 values they are (the best ``format`` can say of their sum);
    ``round_terms=True`` rounds each to ``format`` first, as data stored in it would be (the best
    any order of additions in ``format`` can give; what ``fplab sum`` measures from). The two
    differ when the rounding errors of the terms add up to more than half an ulp of the sum.

    >>> fplab.exact_sum([1e8, 1, -1e8, 1])
    2.0
    >>> fplab.exact_sum([1.0004, 1.0004, 1.0004], "fp16"), fplab.exact_sum([1.0004, 1.0004, 1.0004], "fp16", round_terms=True)
    (3.001953125, 3.0)
    """
    return _core.exact_sum(x, format, round_terms=round_terms)


def nccl_all_reduce(
    buffers: ArrayLike,
    algorithm: str = "Ring",
    protocol: str = "Simple",
    channels: int = 1,
    format: str = "fp32",
    *,
    rings: Optional[Sequence[Sequence[int]]] = None,
) -> _np.ndarray:
    """The sums NCCL's ``ncclAllReduce`` (sum) returns for ``buffers``, one row per rank (an array,
    nested lists, or a PyTorch tensor of any float type): each element added in the order NCCL takes
    it (docs/results/nccl.md), rounded to ``format`` at every addition. ``format`` is the buffers'
    type, fp32, bf16 or fp16, and the rows must already hold its values: another value is an error,
    not rounded (``fplab.round(x, "bf16")`` makes them; NumPy has no bf16).

    ``algorithm``, ``protocol`` and ``channels`` are what ``NCCL_ALGO`` (Ring, Tree), ``NCCL_PROTO``
    (Simple, LL, LL128) and ``NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS`` pin, within one node and
    with the rings NCCL took on every machine measured (0, 1, ..., R - 1); where NCCL takes others
    (``NCCL_DEBUG=INFO`` prints them as "Channel 00/02 : 0 2 1 3"), ``rings`` gives them, channel c
    taking ``rings[c % len(rings)]`` (Ring only). A small buffer takes fewer
    channels than pinned (so 1 and 4 can give the same sums), and LL128's chunks often fall where
    Simple's do; Tree's order within a node is one chain, whatever the protocol and channels.
    Measured equal to NCCL 2.28 bit for bit on 2 and 4 GPUs (docs/results/nccl.md lists the
    combinations: fp32 and bf16 buffers of 1000 to 3e6 elements, and a data-parallel training's
    gradient sums); 8 or more ranks are the model's word, not measured. Where a ring's chunks start
    decides each element's order, so two elements of one buffer can be summed in different orders:

    >>> import numpy, fplab
    >>> x = numpy.ones((3, 12)); x[1] = 2.0**24; x[2] = -(2.0**24)
    >>> fplab.nccl_all_reduce(x)    # elements 8-11 start at rank 0: (1 + 2^24) - 2^24
    array([1., 1., 1., 1., 1., 1., 1., 1., 0., 0., 0., 0.])
    >>> fplab.nccl_all_reduce(x, "Tree")    # within a node a chain: (x2 + x1) + x0
    array([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.])
    """
    for name, value in (("algorithm", algorithm), ("protocol", protocol), ("format", format)):
        if not isinstance(value, str):
            raise Error(f"nccl_all_reduce: {name} must be a name, not {value!r}")
    if isinstance(channels, bool) or not isinstance(channels, int):
        raise Error(f"nccl_all_reduce: channels must be a whole number from 1 to 64, not {channels!r}")
    if hasattr(buffers, "detach") and hasattr(buffers, "float"):  # a PyTorch tensor: bf16 values kept
        buffers = buffers.detach().float().cpu().numpy()
    array = _np.asarray(buffers)
    if array.dtype.kind not in "biuf":
        raise Error(f"nccl_all_reduce: buffers must hold real numbers, not {array.dtype}")
    ring_lists = []
    for ring in rings or ():
        if isinstance(ring, (str, bytes)) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ring):
            raise Error(f"nccl_all_reduce: a ring is a list of rank numbers, not {ring!r}")
        ring_lists.append(list(ring))
    return _core.nccl_all_reduce(array, algorithm, protocol, channels, format, ring_lists)


def reveal_sum(fn: Callable[[Any], Any], n: int, *, verify: int = 0, seed: int = 1, runs: int = 0,
               seconds: float = 0) -> dict:
    """The order in which ``fn`` adds the n elements of a float32 array, found by probing it
    (docs/reveal.md: all 1s but a pair +2^e, -2^e; about 2n calls for a loop, n log2 n / 2 for a
    balanced tree), as ``fplab reveal`` finds a C function's.

    Returns {'tree': "((0+1)+2)"-style text, 'dot': Graphviz, 'nodes': node j's children (ids: a
    term's index, node j's n + j), 'root', 'additions', 'multi_term_nodes', 'depth', 'calls',
    'seconds', 'schedules':
    every fplab schedule whose tree it is, 'replays': with ``verify`` > 0, per candidate arithmetic
    the trials (random inputs, ``seed``) on which replaying the tree gave fn's bits,
    'schedule_replays': with ``verify`` > 0, per named schedule the trials on which fplab's
    evaluator running it (fp32, products fused, its stages' own formats: a tail added in double)
    gave fn's bits}. A function whose answers are not one tree of float additions raises fplab.Error.

    With ``runs`` >= 2, an order that may change from call to call (atomics): the pairs within a
    part are asked ``runs`` times, and the answer is a skeleton (docs/reveal.md, "Orders that vary"): {'varies',
    'parts': each deterministic part's terms, 'skeleton': the parts' trees under one root whose
    order varies, 'dot', 'nodes', 'root', 'schedules': those ending in `all:atomic` whose parts
    are these, 'cross_meets': {size of the subtree where terms of two parts met: calls},
    'chain_of_parts', 'parts_met': {parts arrived when two met: calls}, 'uniform_order_distance',
    'runs', 'calls', 'seconds', 'replays': with ``verify`` > 0, per arithmetic the trials on which
    some order of the replayed parts, added as floats, gave fn's bits (with 'orders_per_trial',
    'every_order' and 'distinct_results': how many different results those orders give)}; about
    n x parts / 2 + runs x n calls.

    ``seconds`` > 0: give up with an fplab.Error ("gave up after K calls: the time limit ...") once
    that long has passed since the call began (a probe of tens of thousands of terms on a lent
    machine); 0, the default: no limit.

    >>> import numpy as np
    >>> fplab.reveal_sum(lambda x: np.sum(x), 100)["schedules"][0]
    'all:numpy_pairwise'
    """
    _check_reveal_n("reveal_sum", n)
    _check_reveal_runs("reveal_sum", runs)
    _check_reveal_seconds("reveal_sum", seconds)
    return _core.reveal_sum(fn, n, verify, seed, runs, seconds=float(seconds))


def reveal_dot(fn: Callable[[Any, Any], Any], n: int, *, verify: int = 0, seed: int = 1, runs: int = 0,
               seconds: float = 0) -> dict:
    """The order in which ``fn(a, b)`` adds the n products of a dot product of two float32 arrays,
    found by probing it with b all 1 (every product exact): what a matmul, F.linear or a
    convolution does for one output element, when ``fn`` places a and b in its operands and reads
    that element back (experiments/reveal_torch.py does so for PyTorch's kernels).

    Returns reveal_sum's dict; its replays try the dot product's arithmetics: products fused
    (FMA) onto the partial sum, rounded first, or fp64. ``runs`` and ``seconds`` as in reveal_sum.

    >>> import numpy as np
    >>> fplab.reveal_dot(lambda a, b: np.float32(sum(np.float64(a) * b)), 4)["tree"]
    '(((0+1)+2)+3)'
    """
    _check_reveal_n("reveal_dot", n)
    _check_reveal_runs("reveal_dot", runs)
    _check_reveal_seconds("reveal_dot", seconds)
    return _core.reveal_dot(fn, n, verify, seed, runs, seconds=float(seconds))


def name_tree(nodes: Sequence[Sequence[int]], n: int) -> List[str]:
    """The schedules whose addition tree of n terms is ``nodes`` (a revealed tree's ``nodes``: node j,
    id n + j, lists its children; the last node is the root), as reveal_sum and reveal_dot name a
    tree they reveal: a tree stored before the grammar or the candidates could say its order is
    named again (experiments/reveal_torch.py table --rename).

    >>> fplab.name_tree([[0, 1], [4, 2], [5, 3]], 4)[0]
    'all:seq'
    """
    _check_reveal_n("name_tree", n)
    for node in nodes:
        for c in node:
            if isinstance(c, bool) or not isinstance(c, (int, _np.integer)) or c < 0:
                raise Error(f"name_tree: a child must be a term's or a node's id (a whole number >= 0), not {c!r}")
    return list(_core.name_tree([[int(c) for c in node] for node in nodes], n))


def _check_reveal_n(name: str, n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 1 << 24:
        raise Error(f"{name}: n must be a whole number from 2 to 2^24, not {n!r}")


def _check_reveal_seconds(name: str, seconds: Any) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
        raise Error(f"{name}: seconds must be 0 (no limit) or a positive number, not {seconds!r}")


def _check_reveal_runs(name: str, runs: Any) -> None:
    if isinstance(runs, bool) or not isinstance(runs, int) or not (runs == 0 or 2 <= runs <= 1000):
        raise Error(f"{name}: runs must be 0 (one tree) or a whole number from 2 to 1000, not {runs!r}")


def profiles(profiles_dir: Sequence[str] = ()) -> List[str]:
    """The names of every hardware profile: the shipped ones and those in ``profiles_dir``
    folders or $FPLAB_HW_PROFILES (which come first and may override a shipped one)."""
    return _core.profile_names(list(profiles_dir))


def profile(name: str, profiles_dir: Sequence[str] = ()) -> Profile:
    """A hardware profile by name (see fplab.profiles()) or path to a .toml file.

    The result has ``name``, ``description``, ``path``, ``parallelism`` and two tables,
    ``default`` and ``deterministic``: {op kind: OpChoice} for fwd, dgrad, wgrad, bias_grad,
    bn_stats, softmax and loss, each with ``schedule`` and ``arithmetic``;
    ``op.arguments()`` are the keyword arguments of reduce, dot and matmul for it.

    >>> fplab.profile("h100").default["wgrad"]
    OpChoice('split(16):seq | all:seq', 'fp32/rne/fused')
    """
    return _core.find_profile(name, list(profiles_dir))

