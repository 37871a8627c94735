"""The torch-cpu-sum(V) preset against torch.sum of a contiguous float32 tensor on the CPU.

ATen's cascade sum (sim/torch_cascade.hpp) reads the terms as V-lane vectors, V being the lanes of
the kernel torch dispatched to on this CPU: 8 for AVX2 and the default build, and also on an
AVX-512 CPU with torch 2.11 (measured); 16 were its AVX-512 kernel to run. One thread: a parallel reduction splits the range in other places. The lengths
cover the scalar loop (n < V), the vector loop's rests (n mod V, vectors mod 4), and rows past the
cascade's 16-row level (n > 64 V) up to its third level (4096 rows).
"""

import unittest

import numpy as np

import fplab

try:
    import torch
except ImportError:  # the preset is still tested through fplab's own trees (tests/test_torch_cascade.cpp)
    torch = None


def vector_lanes():
    """The lanes that give torch's bits on one probe vector; every other length must then agree with
    them. Not torch.backends.cpu.get_cpu_capability(): torch 2.11 on an AVX-512 Xeon says "AVX512"
    and still sums in 8-lane vectors (its sum kernel is not among those it dispatches to AVX-512;
    measured 2026-11-28, docs/reveal.md)."""
    probe = samples(4099, 99)
    want = np.float32(torch.from_numpy(probe).sum().item()).tobytes()
    for lanes in (8, 16):
        if np.float32(fplab.reduce(probe, f"torch-cpu-sum({lanes})")).tobytes() == want:
            return lanes
    return None


def samples(n, seed):
    rng = np.random.default_rng(seed)
    # Wide exponents and both signs: a different order shows in the bits.
    return (rng.standard_normal(n) * np.exp2(rng.integers(-12, 13, n))).astype(np.float32)


@unittest.skipIf(torch is None, "no PyTorch here")
class TorchCpuSum(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        cls.lanes = vector_lanes()
        if cls.lanes is None:
            raise AssertionError("torch.sum matches torch-cpu-sum with neither 8 nor 16 lanes on a probe vector")

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls.threads)

    def test_every_length_is_torch_bit_for_bit(self):
        lengths = list(range(1, 70)) + [100, 127, 128, 129, 511, 512, 513, 1000, 4096, 4099, 65536 + 37, 300001]
        schedule = f"torch-cpu-sum({self.lanes})"
        differ = []
        for n in lengths:
            for seed in range(3):
                x = samples(n, 1000 * n + seed)
                want = np.float32(torch.from_numpy(x).sum().item())
                got = np.float32(fplab.reduce(x, schedule))
                if want.tobytes() != got.tobytes():
                    differ.append((n, seed, float(want), float(got)))
        self.assertEqual(differ, [], f"{schedule} differs from torch.sum (n, seed, torch, fplab)")

    def test_an_order_of_its_own(self):
        # At 4096 terms the cascade is neither a chain nor NumPy's pairwise sum: the test above
        # could not pass by accident of a forgiving input.
        x = samples(4096, 7)
        cascade = fplab.reduce(x, f"torch-cpu-sum({self.lanes})")
        for other in ("seq", "numpy", "pairwise"):
            self.assertNotEqual(cascade, fplab.reduce(x, other), other)


if __name__ == "__main__":
    unittest.main()
