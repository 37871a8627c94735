"""How arrays cross into C++: no copy where the dtype fits, any array-like otherwise, and the GIL
released so that threads run the C++ work side by side."""

import threading
import tracemalloc
import unittest

import numpy as np

import fplab


def peak_bytes(call):
    """The most memory Python-side allocations (NumPy's included) held during call()."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class ZeroCopy(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(1).standard_normal(2_000_000)  # 16 MB of float64

    def test_contiguous_float64_is_not_copied(self):
        self.assertLess(peak_bytes(lambda: fplab.reduce(self.x, "seq", "fp64")), self.x.nbytes // 8)
        self.assertLess(peak_bytes(lambda: fplab.exact_sum(self.x)), self.x.nbytes // 8)
        # round allocates its result, and nothing more.
        self.assertLess(peak_bytes(lambda: fplab.round(self.x, "bf16")), self.x.nbytes * 5 // 4)

    def test_other_dtypes_are_converted(self):
        # The measurement sees a copy: float32 input becomes a float64 array first.
        x32 = self.x.astype(np.float32)
        self.assertGreaterEqual(peak_bytes(lambda: fplab.reduce(x32, "seq")), self.x.nbytes)
        self.assertEqual(fplab.reduce(x32, "seq"), fplab.reduce(x32.astype(np.float64), "seq"))

    def test_array_likes(self):
        self.assertEqual(fplab.reduce([1, 2, 3], "seq"), 6.0)
        self.assertEqual(fplab.reduce(range(1, 4), "seq"), 6.0)
        self.assertEqual(fplab.reduce(np.arange(10)[::2], "seq"), 20.0)
        self.assertEqual(fplab.reduce([], "seq"), 0.0)


class ReleasesTheGil(unittest.TestCase):
    def test_threads_each_finish_with_the_single_threaded_result(self):
        x = np.random.default_rng(2).standard_normal(1_000_000)
        expected = fplab.reduce(x, "cuda-naive-sum(256,64)", impl_seed=4)
        results = [None] * 4

        def work(i):
            results[i] = fplab.reduce(x, "cuda-naive-sum(256,64)", impl_seed=4)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [expected] * 4)


if __name__ == "__main__":
    unittest.main()
