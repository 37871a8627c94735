// The numpy presets against NumPy itself: numpy.sum of float16, float32 and float64 arrays must
// equal the matching preset's result bit for bit. NumPy 2.3 changed the order (numpy PR #27883: a contiguous
// axis is no longer cut into the iterator's 8192-element buffers), so each NumPy is held to the
// preset of its version: `numpy-2.2` up to 2.2, `numpy` from 2.3 on. The interpreters asked:
// Debian's /usr/bin/python3 with python3-numpy (1.24, installed by scripts/setup), and
// $FPLAB_NUMPY_PYTHON, or else the python3 on PATH, where one has NumPy >= 2.3 (ctest points it at
// build/numpy-venv, which scripts/setup fills from PyPI). A missing one is skipped with a warning
// that says how to provide it, except under CI (CI=true), where it fails: CI runs scripts/setup.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fp/round.hpp"
#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"
#include "tests/python_output.hpp"

using namespace fplab::sim;
using fplab::test::python_output;

namespace {

struct NumpyVersion {
  int major = 0, minor = 0;
  std::string text;  // "" when the interpreter or its numpy is missing
  bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
};

NumpyVersion numpy_version(const std::string& python) {
  NumpyVersion v;
  v.text = python_output(python, "import numpy; print(numpy.__version__)");
  if (!v.text.empty() && std::sscanf(v.text.c_str(), "%d.%d", &v.major, &v.minor) != 2) v.text.clear();
  return v;
}

// numpy.sum of each array of `dtype` ("float16", "float32" or "float64"), in one interpreter;
// empty on failure. The values must be exact in that dtype: they go to the file as doubles, cast there.
std::vector<double> numpy_sums(const std::string& python, const std::vector<std::vector<double>>& arrays,
                               const std::string& dtype) {
  char path[] = "/tmp/fplab_numpy_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  close(fd);
  std::vector<std::string> arguments = {path, dtype};
  {
    std::ofstream out(path, std::ios::binary);
    for (const auto& x : arrays) {
      out.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(double)));
      arguments.push_back(std::to_string(x.size()));
    }
  }
  const std::string text = python_output(python, R"(
import sys, numpy as np
x, at, out = np.fromfile(sys.argv[1], dtype=np.float64), 0, []
for n in map(int, sys.argv[3:]):
    out.append(float(np.sum(x[at:at + n].astype(sys.argv[2]))).hex())
    at += n
print(" ".join(out))
)",
                                         arguments);
  std::remove(path);
  // Python's float.hex(), read back exactly by strtod.
  std::vector<double> sums;
  std::istringstream words(text);
  for (std::string word; words >> word;) sums.push_back(std::strtod(word.c_str(), nullptr));
  if (sums.size() != arrays.size()) sums.clear();
  return sums;
}

std::string hex(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

// Every n on both sides of NumPy's block edges (8, 128, 8192) and well past one buffer, then
// kRandomSizes more past one buffer: the float16 orders part there in about one array in eight.
constexpr size_t kSizes[] = {1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 16385, 24581, 100000, 1000000};
constexpr int kRandomSizes = 60;

// One dtype's pair of presets: NumPy >= 2.3's order and the one before.
struct PresetPair {
  const char* dtype;
  fplab::fp::Format format;
  const char* current;  // NumPy >= 2.3
  const char* older;    // NumPy <= 2.2
};

// Holds the interpreter's NumPy to the preset of its version, on float16, float32 and float64
// arrays, and checks that the other preset parts from NumPy somewhere past 8192 terms (else this
// test could not tell the two orders apart). float16 sums add in float32 (numpy-fp16 and
// numpy-2.2-fp16 with --format fp16); their terms stay small, so that no sum overflows.
void check_against(const std::string& python, const NumpyVersion& version) {
  const bool current = version.at_least(2, 3);
  std::mt19937_64 g(42);
  std::normal_distribution<double> d;
  for (const PresetPair& p : {PresetPair{"float16", fplab::fp::fp16(), "numpy-fp16", "numpy-2.2-fp16"},
                              PresetPair{"float32", fplab::fp::fp32(), "numpy", "numpy-2.2"},
                              PresetPair{"float64", fplab::fp::fp64(), "numpy", "numpy-2.2"}}) {
    const char* const matching = current ? p.current : p.older;
    const char* const other = current ? p.older : p.current;
    const Schedule ours = parse_schedule(matching), theirs_not = parse_schedule(other);
    Arithmetic arithmetic;
    arithmetic.format = p.format;
    const bool half = p.format == fplab::fp::fp16();
    std::vector<size_t> sizes(std::begin(kSizes), std::end(kSizes));
    std::uniform_int_distribution<size_t> past_one_buffer(8193, 80000);
    for (int k = 0; k < kRandomSizes; ++k) sizes.push_back(past_one_buffer(g));
    std::vector<std::vector<double>> arrays;
    for (size_t n : sizes) {
      arrays.emplace_back(n);
      for (auto& v : arrays.back())
        v = fplab::fp::round_double(d(g) * std::exp((half ? 1 : 3) * d(g)), p.format, {}).value;
    }
    const std::vector<double> expected = numpy_sums(python, arrays, p.dtype);
    REQUIRE(expected.size() == arrays.size());
    int other_differs = 0;
    for (size_t a = 0; a < arrays.size(); ++a) {
      const double got = reduce(ours, arrays[a], arithmetic);
      INFO(python << " (NumPy " << version.text << "), " << p.dtype << ", n = " << sizes[a] << ": numpy says "
                  << hex(expected[a]) << ", preset " << matching << " says " << hex(got));
      CHECK(expected[a] == got);
      other_differs += reduce(theirs_not, arrays[a], arithmetic) != expected[a];
    }
    INFO(p.dtype << ": preset " << other << " should differ from NumPy " << version.text << " at some n > 8192");
    CHECK(other_differs > 0);
  }
}

}  // namespace

TEST_CASE("numpy-2.2 presets == Debian's NumPy 1.24 numpy.sum bit for bit, float16/32/64, n to 10^6") {
  const std::string python = "/usr/bin/python3";
  const NumpyVersion version = numpy_version(python);
  if (version.text.empty()) {
    WARN("SKIPPED: /usr/bin/python3 with numpy not found (scripts/setup installs python3-numpy)");
    return;
  }
  check_against(python, version);
}

TEST_CASE("numpy presets == NumPy >= 2.3 numpy.sum bit for bit, float16/32/64, n to 10^6") {
  const char* const chosen = std::getenv("FPLAB_NUMPY_PYTHON");
  const std::string python = chosen && *chosen ? chosen : "python3";
  const NumpyVersion version = numpy_version(python);
  if (!version.at_least(2, 3)) {
    const char* const ci = std::getenv("CI");
    if (ci && std::string(ci) == "true")
      FAIL("no NumPy >= 2.3 in " << python << " under CI: scripts/setup should have installed one");
    WARN("SKIPPED: no NumPy >= 2.3 in " << python << " (" << (version.text.empty() ? "none" : version.text)
                                        << "); scripts/setup installs one into build/numpy-venv, or set "
                                           "FPLAB_NUMPY_PYTHON to an interpreter that has one");
    return;
  }
  check_against(python, version);
}

// np.dot of two float32 vectors reaches the BLAS's sdot: Debian's NumPy 1.24 links libblas.so.3,
// which is OpenBLAS 0.3.21; which sdot kernel it runs depends on the CPU's core: the AVX-512
// (Cooperlake/SkylakeX) one is the openblas-sdot preset, the AVX2 (Haswell/Zen) one
// openblas-sdot-haswell (docs/reveal.md). The script names the preset and the core, then prints
// np.dot of each pair of vectors of the file (sizes in argv) in hex, one line.
TEST_CASE("openblas-sdot presets == np.dot of float32 vectors (Debian NumPy, OpenBLAS) bit for bit, n 1..40 to 32768") {
  const std::string python = "/usr/bin/python3";
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 40; ++n) sizes.push_back(n);
  for (size_t n : {64, 100, 1000, 4096, 32768}) sizes.push_back(n);
  constexpr int kTrials = 4;
  std::mt19937_64 g(2026);
  std::normal_distribution<double> d;
  std::vector<std::vector<double>> as, bs;
  for (size_t n : sizes)
    for (int t = 0; t < kTrials; ++t) {
      as.emplace_back(n), bs.emplace_back(n);
      for (size_t i = 0; i < n; ++i) {  // magnitudes over a few binades, every fifth product cancelling
        const bool cancel = i % 5 == 4;
        as.back()[i] = cancel ? as.back()[i - 1] : static_cast<float>(d(g) * std::exp2(std::floor(2 * d(g))));
        bs.back()[i] = cancel ? -bs.back()[i - 1] : static_cast<float>(d(g));
      }
    }
  char path[] = "/tmp/fplab_sdot_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t v = 0; v < as.size(); ++v)
      for (const auto* x : {&as[v], &bs[v]})
        for (double e : *x) {
          const auto f = static_cast<float>(e);
          out.write(reinterpret_cast<const char*>(&f), sizeof f);
        }
  }
  std::vector<std::string> arguments = {path, std::to_string(kTrials)};
  for (size_t n : sizes) arguments.push_back(std::to_string(n));
  const std::string text = python_output(python, R"(
import sys, ctypes
try:
    import numpy as np
except ImportError:
    print("skip: no numpy"); sys.exit()
try:
    blas = ctypes.CDLL("libblas.so.3")
    blas.openblas_get_corename.restype = ctypes.c_char_p
    core = blas.openblas_get_corename().decode()
except (OSError, AttributeError):
    print("skip: libblas.so.3 is not OpenBLAS"); sys.exit()
presets = {"cooperlake": "openblas-sdot", "skylakex": "openblas-sdot", "sapphirerapids": "openblas-sdot",
           "haswell": "openblas-sdot-haswell", "zen": "openblas-sdot-haswell"}
if core.lower() not in presets:
    print("skip: OpenBLAS core " + core + ", whose sdot kernel no preset models: only AVX-512 SkylakeX and AVX2 Haswell/Zen")
    sys.exit()
x = np.fromfile(sys.argv[1], dtype=np.float32)
trials, at, out = int(sys.argv[2]), 0, []
for n in map(int, sys.argv[3:]):
    for _ in range(trials):
        a, b = x[at:at + n], x[at + n:at + 2 * n]
        at += 2 * n
        out.append(float(np.dot(a, b)).hex())
print(presets[core.lower()] + " " + core + " " + " ".join(out))
)",
                                         arguments);
  std::remove(path);
  if (text.rfind("skip: ", 0) == 0 || text.empty()) {
    WARN("SKIPPED: " << (text.empty() ? "/usr/bin/python3 with numpy not found" : text.substr(6)));
    return;
  }
  std::istringstream words(text);
  std::string preset, core;
  REQUIRE(words >> preset >> core);
  const Schedule sdot = parse_schedule(preset);
  Arithmetic arithmetic;  // fp32, products fused: the FMA kernel; the preset's tail says the rest
  size_t matched = 0, v = 0;
  for (size_t n : sizes)
    for (int t = 0; t < kTrials; ++t, ++v) {
      std::string word;
      REQUIRE(words >> word);
      const double expected = std::strtod(word.c_str(), nullptr);
      const double got = dot_reference(sdot, as[v], bs[v], arithmetic);
      INFO("OpenBLAS core " << core << ", n = " << n << " trial " << t << ": np.dot says " << hex(expected) << ", "
                                 << preset << " says " << hex(got));
      CHECK(expected == got);
      matched += expected == got;
    }
  CHECK(matched == sizes.size() * kTrials);
}
