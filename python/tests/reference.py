"""Independent references for the package's tests: rounding of exact rationals (fractions.Fraction)
to an IEEE-like binary format, and sums and dot products computed one rounding at a time with it
or with NumPy's own float32 scalars. Nothing here calls fplab."""

from fractions import Fraction
import math

import numpy as np

# (exponent bits, stored fraction bits) of the IEEE-like formats the tests use.
FORMATS = {"fp64": (11, 52), "fp32": (8, 23), "bf16": (8, 7), "fp16": (5, 10)}


def _floor_log2(a):
    """floor(log2(a)) for a positive Fraction, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def round_fraction(q, fmt, mode="rne"):
    """The exact rational q rounded to the format (a name of FORMATS) in mode rne, rna, rz, ru or
    rd, as IEEE 754 says: subnormals kept, overflow to infinity or the largest finite value."""
    exp_bits, man_bits = FORMATS[fmt]
    q = Fraction(q)
    if q == 0:
        return 0.0
    negative = q < 0
    a = -q if negative else q
    emax = 2 ** (exp_bits - 1) - 1
    emin = 1 - emax
    e = max(_floor_log2(a), emin)
    quantum = Fraction(2) ** (e - man_bits)
    n = math.floor(a / quantum)
    rest = a / quantum - n
    toward_infinity = {"ru": not negative, "rd": negative}.get(mode)
    if rest:
        if mode == "rne":
            n += rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1)
        elif mode == "rna":
            n += rest >= Fraction(1, 2)
        elif toward_infinity:
            n += 1
    value = n * quantum
    largest = (2 - Fraction(2) ** -man_bits) * Fraction(2) ** emax
    if value > largest:
        away = mode in ("rne", "rna") or toward_infinity
        value = math.inf if away else largest
    value = float(value)
    return -value if negative else value


def fp32_seq(values):
    """((v0 + v1) + v2) + ... in float32, each addition by NumPy's float32 scalars."""
    acc = np.float32(values[0])
    for v in values[1:]:
        acc = np.float32(acc + np.float32(v))
    return float(acc)


def fp32_rev(values):
    """v0 + (v1 + (... + (v[n-2] + v[n-1]))) in float32."""
    acc = np.float32(values[-1])
    for v in reversed(values[:-1]):
        acc = np.float32(np.float32(v) + acc)
    return float(acc)


def fp32_pairwise(values):
    """The balanced tree: the halves [0, n//2) and [n//2, n) summed recursively, then added."""
    if len(values) == 1:
        return float(np.float32(values[0]))
    m = len(values) // 2
    return float(np.float32(np.float32(fp32_pairwise(values[:m])) + np.float32(fp32_pairwise(values[m:]))))


def seq_sum(values, fmt, mode="rne"):
    """A left fold, every addition the exact sum rounded once to the format."""
    acc = Fraction(float(values[0]))
    for v in values[1:]:
        acc = Fraction(round_fraction(acc + Fraction(float(v)), fmt, mode))
    return float(acc)


def fma_chain(a, b, fmt):
    """acc = fma(a[i], b[i], acc) from acc = a[0] * b[0] rounded: CUDA's FMA chain."""
    acc = Fraction(round_fraction(Fraction(float(a[0])) * Fraction(float(b[0])), fmt))
    for x, y in zip(a[1:], b[1:]):
        acc = Fraction(round_fraction(acc + Fraction(float(x)) * Fraction(float(y)), fmt))
    return float(acc)
