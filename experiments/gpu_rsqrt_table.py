#!/usr/bin/env python3
"""A device's float32 rsqrt, measured whole: torch.rsqrt on every float32 in [1, 4) against the
correctly rounded 1/sqrt(x), kept as a table of differences in units in the last place.

  experiments/gpu_rsqrt_table.py measure --device cuda --out rsqrt_h200.npz
  experiments/gpu_rsqrt_table.py check rsqrt_h200.npz --device cuda --samples 1000000
  experiments/gpu_rsqrt_table.py measure --device cpu --out /tmp/rsqrt_cpu.npz --first 65536
  experiments/gpu_rsqrt_table.py pack rsqrt_h200.npz fp/data/cuda_rsqrt_delta.bin.gz
  experiments/gpu_rsqrt_table.py samples --device cuda --out tests/data/cuda_rsqrt_h200_samples.bin

Why: cuDNN's BatchNorm computes its inverse standard deviation with the GPU's own rsqrt
(docs/results/calibration_torch.md, "The probes of 2026-11-29"), an approximation that is not
correctly rounded. To give those bits on a CPU, an emulation needs the device's function. Every
positive normal x is m · 4^k with m in [1, 4) (2^24 float32 values: every significand at both
exponent parities), and if the device scales as the mathematics does, rsqrt(x) = rsqrt(m) · 2^-k:
then 2^24 differences are the whole function on normal inputs.

measure: the 2^24 values of [1, 4) (or the first --first of them) on --device, each against the
correctly rounded result (float64 first; where that lies within 2^-40 of a float32 midpoint, decided
exactly in integers); the differences (device - correct, in ulps) as int8 into --out (NumPy .npz,
written under a temporary name, then renamed), with their histogram printed; then the scaling
checked on --samples random positive normal floats across the exponent range, and the device's
results for zeros, infinities, NaN, negatives and subnormals printed (fp/cuda_rsqrt.cpp models them:
tests/test_cuda_rsqrt.cpp holds it to the device's samples, subnormals among them).

check: the table's emulation (emulate() below) against the device on --samples random positive
normal floats: the share bit-identical (must be 100% for the table to stand for the device). The
table is an .npz of measure or a packed one of pack.

pack: an .npz table as fplab's C++ reads it (fp/cuda_rsqrt.cpp): the differences + 2 in two bits
each, four to a byte from the low bits up, gzip-compressed; written under a temporary name, then
renamed.

samples: the device's rsqrt of --count floats, for fplab's tests to hold its emulation to:
random positive normal floats of every binade, subnormals, and zeros, infinities, NaN and negatives;
little-endian uint32 pairs (the input's bits, the result's bits) into --out.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from typing import List

import numpy as np

ONE = 0x3F800000  # the bits of 1.0f; [1, 4) is ONE .. ONE + 2^24 - 1
SPAN = 1 << 24


def correctly_rounded(m: np.ndarray) -> np.ndarray:
    """float32 bits of 1/sqrt(m) rounded to nearest even, m float32 > 0 (normal results)."""
    approx = 1.0 / np.sqrt(m.astype(np.float64))  # error below 2^-52 relative
    candidate = approx.astype(np.float32)
    # Within 2^-40 (relative) of a midpoint between float32 neighbours, float64 may have rounded to
    # the wrong side: those are decided in integers.
    bits = candidate.view(np.uint32).astype(np.int64)
    below = (bits - 1).astype(np.uint32).view(np.float32).astype(np.float64)
    above = (bits + 1).astype(np.uint32).view(np.float32).astype(np.float64)
    here = candidate.astype(np.float64)
    near = (np.abs(approx - (here + below) / 2) < approx * 2.0 ** -40) | \
           (np.abs(approx - (here + above) / 2) < approx * 2.0 ** -40)
    out = bits.copy()
    for i in np.flatnonzero(near):
        out[i] = _exact(float(m[i]))
    return out.astype(np.uint32)


def _exact(m: float) -> int:
    """The float32 bits of 1/sqrt(m) rounded to nearest even, decided in exact rationals: for a
    midpoint h between neighbours, 1/sqrt(m) > h exactly when h^2 m < 1."""
    from fractions import Fraction

    def value(bits: int) -> Fraction:
        return Fraction(float(np.array([bits], dtype=np.uint32).view(np.float32)[0]))

    x = Fraction(m)
    b = int(np.array([1.0 / np.sqrt(m)], dtype=np.float32).view(np.uint32)[0])
    for low, high in ((b, b + 1), (b - 1, b)):
        middle = (value(low) + value(high)) / 2
        side = middle * middle * x
        if side == 1:  # on the midpoint: the even significand
            return low if low % 2 == 0 else high
        if low == b and side < 1:
            return high  # above the upper midpoint (float64's error is far below an ulp: one step)
        if high == b and side > 1:
            return low  # below the lower midpoint
    return b


def emulate(x: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The device's rsqrt of positive normal float32 x from the table: x = m 4^k, m in [1, 4)."""
    bits = x.view(np.uint32).astype(np.int64)
    exponent = (bits >> 23) - 127
    k = np.floor_divide(exponent, 2)
    m_bits = (bits & 0x7FFFFF) | ((127 + exponent - 2 * k) << 23)
    index = m_bits - ONE
    y_bits = correctly_rounded(m_bits.astype(np.uint32).view(np.float32)).astype(np.int64) + delta[index]
    y = y_bits.astype(np.uint32).view(np.float32)
    return (y.astype(np.float64) * np.exp2(-k.astype(np.float64))).astype(np.float32)  # exact: normal results


def _device_rsqrt(torch, x: np.ndarray, device: str, chunk: int = 1 << 22) -> np.ndarray:
    out = np.empty_like(x)
    for start in range(0, len(x), chunk):
        part = torch.from_numpy(x[start:start + chunk]).to(device)
        out[start:start + chunk] = torch.rsqrt(part).cpu().numpy()
    return out


def _random_normals(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    exponents = rng.integers(1, 255, count, dtype=np.uint32)  # every normal binade
    return ((exponents << 23) | rng.integers(0, 1 << 23, count, dtype=np.uint32)).view(np.float32)


def _write_whole(path: str, data: bytes) -> None:
    """A file written whole or not at all: a temporary name in the same folder, then renamed."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".rsqrt-")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _save(path: str, **arrays) -> None:
    """An .npz of the arrays, written whole or not at all."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    _write_whole(path, buffer.getvalue())


def measure(args: argparse.Namespace) -> int:
    import torch

    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        print(f"gpu_rsqrt_table.py: cannot write into {folder} (--out)", file=sys.stderr)
        return 2
    count = min(args.first, SPAN) if args.first else SPAN
    m = (np.arange(count, dtype=np.uint32) + ONE).view(np.float32)
    device = _device_rsqrt(torch, m, args.device).view(np.uint32).astype(np.int64)
    difference = device - correctly_rounded(m).astype(np.int64)
    if np.abs(difference).max() > 127:
        print(f"gpu_rsqrt_table.py: a difference of {int(np.abs(difference).max())} ulps: not a table of int8",
              file=sys.stderr)
        return 1
    values, counts = np.unique(difference, return_counts=True)
    print(f"{count} values of [1, 4) on {args.device} ({torch.__version__}"
          f"{', ' + torch.cuda.get_device_name() if args.device.startswith('cuda') else ''}):")
    for v, c in zip(values, counts):
        print(f"  {int(v):+d} ulp: {int(c)} ({100 * c / count:.3f}%)")
    _save(args.out, delta=difference.astype(np.int8), first=np.array([ONE], dtype=np.uint32),
          device=np.array([args.device]), torch=np.array([torch.__version__]))
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    if count == SPAN:
        x = _random_normals(args.samples, 1)
        x = x[(x > 2.0 ** -120) & (x < 2.0 ** 120)]  # results and scalings stay normal
        same = emulate(x, difference.astype(np.int8)).view(np.uint32) == _device_rsqrt(torch, x, args.device).view(np.uint32)
        print(f"scaling: {int(same.sum())} of {len(x)} random normal floats as the table says")
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 2.0 ** -130, 2.0 ** -149, 2.0 ** -126],
                        dtype=np.float32)
    for x, y in zip(specials, _device_rsqrt(torch, specials, args.device)):
        print(f"  rsqrt({x!r}) = {y!r}")
    return 0


def pack_table(delta: np.ndarray) -> bytes:
    """The table's differences (-2..+1) in two bits each, four to a byte, low bits first."""
    if delta.min() < -2 or delta.max() > 1 or len(delta) % 4:
        raise ValueError("a table to pack holds differences of -2 to +1 ulp, a multiple of four of them")
    u = (delta.astype(np.int16) + 2).astype(np.uint8)
    return (u[0::4] | (u[1::4] << 2) | (u[2::4] << 4) | (u[3::4] << 6)).astype(np.uint8).tobytes()


def unpack_table(packed: bytes) -> np.ndarray:
    """pack_table's inverse."""
    b = np.frombuffer(packed, dtype=np.uint8)
    u = np.stack([(b >> s) & 3 for s in (0, 2, 4, 6)], axis=1).reshape(-1)
    return (u.astype(np.int16) - 2).astype(np.int8)


def read_table(path: str) -> np.ndarray:
    """The differences of an .npz of measure or a gzip file of pack."""
    if path.endswith(".npz"):
        with np.load(path) as table:
            return table["delta"]
    import gzip
    with gzip.open(path, "rb") as f:
        return unpack_table(f.read())


def pack(args: argparse.Namespace) -> int:
    import gzip
    delta = read_table(args.table)
    if len(delta) != SPAN:
        print(f"gpu_rsqrt_table.py: {args.table} holds {len(delta)} values, not the whole [1, 4)", file=sys.stderr)
        return 2
    _write_whole(args.out, gzip.compress(pack_table(delta), compresslevel=9, mtime=0))
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    return 0


def sample_inputs(count: int, seed: int) -> np.ndarray:
    """Positive normals of every binade, subnormals and the special values, `count` in all."""
    rng = np.random.default_rng(seed)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.0 ** -140, 1.0, 4.0, 2.0 ** -126,
                         2.0 ** -149, 2.0 ** -130, np.finfo(np.float32).max], dtype=np.float32)
    subnormals = rng.integers(1, 1 << 23, count // 8, dtype=np.uint32).view(np.float32)
    normals = _random_normals(max(count - len(specials) - len(subnormals), 0), seed)
    return np.concatenate([specials, subnormals, normals])[:count]


def samples(args: argparse.Namespace) -> int:
    import torch
    x = sample_inputs(args.count, 3)
    y = _device_rsqrt(torch, x, args.device)
    pairs = np.stack([x.view(np.uint32), y.view(np.uint32)], axis=1).astype("<u4")
    _write_whole(args.out, pairs.tobytes())
    print(f"wrote {args.out}: {len(x)} inputs and the device's results")
    return 0


def check(args: argparse.Namespace) -> int:
    import torch

    delta = read_table(args.table)
    if len(delta) != SPAN:
        print(f"gpu_rsqrt_table.py: {args.table} holds {len(delta)} values, not the whole [1, 4)", file=sys.stderr)
        return 2
    x = _random_normals(args.samples, 2)
    x = x[(x > 2.0 ** -120) & (x < 2.0 ** 120)]
    same = emulate(x, delta).view(np.uint32) == _device_rsqrt(torch, x, args.device).view(np.uint32)
    print(f"{int(same.sum())} of {len(x)} random normal floats bit for bit ({100 * same.mean():.4f}%)")
    return 0 if same.all() else 1


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  %(prog)s measure --device cpu --out /tmp/r.npz --first 65536\n")
    commands = parser.add_subparsers(dest="command", required=True)
    m = commands.add_parser("measure", help="the table of [1, 4) on a device")
    m.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    m.add_argument("--out", required=True, help="the table (.npz)")
    m.add_argument("--first", type=int, default=0, help="only the first N values of [1, 4) (default: all 2^24)")
    m.add_argument("--samples", type=int, default=1 << 20, help="random floats for the scaling check")
    c = commands.add_parser("check", help="the table's emulation against the device")
    c.add_argument("table")
    c.add_argument("--device", default="cuda")
    c.add_argument("--samples", type=int, default=1 << 20)
    p = commands.add_parser("pack", help="an .npz table packed for fplab's C++")
    p.add_argument("table")
    p.add_argument("out")
    s = commands.add_parser("samples", help="the device's results on sample floats, for the tests")
    s.add_argument("--device", default="cuda")
    s.add_argument("--count", type=int, default=8192)
    s.add_argument("--out", required=True)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    if args.command == "pack":
        try:
            return pack(args)
        except (OSError, ValueError) as error:
            print(f"gpu_rsqrt_table.py: {error}", file=sys.stderr)
            return 2
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_rsqrt_table.py: --device {args.device}, but this PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    if (args.command == "samples" and args.count < 16) or (args.command != "samples" and args.samples < 1) or \
            (args.command == "measure" and args.first < 0):
        print("gpu_rsqrt_table.py: --samples at least 1, --count at least 16, --first 0 (all) or more",
              file=sys.stderr)
        return 2
    try:
        return {"measure": measure, "check": check, "samples": samples}[args.command](args)
    except OSError as error:
        print(f"gpu_rsqrt_table.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
