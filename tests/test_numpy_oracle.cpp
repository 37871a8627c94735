// The numpy presets against NumPy itself: numpy.sum of float32 and float64 arrays must equal the
// matching preset's result bit for bit. NumPy 2.3 changed the order (numpy PR #27883: a contiguous
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
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "util/external_program.hpp"

using namespace fplab::sim;

namespace {

// The last line the interpreter prints running `code` with `arguments` (sys.argv[1:]), or "" when
// it cannot start or fails. No shell: util::run_program passes an argument vector.
std::string python_output(const std::string& python, const std::string& code,
                          const std::vector<std::string>& arguments = {}) {
  std::vector<std::string> argv = {"-c", code};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  fplab::util::ProgramResult result;
  try {
    result = fplab::util::run_program(python, argv);
  } catch (const std::exception&) {
    return "";
  }
  if (result.exit_status != 0) return "";
  std::string text = result.output;  // stdout and stderr together: a warning may precede the line
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.substr(text.find_last_of('\n') + 1);
}

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

// numpy.sum of the values as an array of `dtype` ("float32" or "float64"), or NaN on failure.
// The values must be exact in that dtype (they are written to the file in it).
double numpy_sum(const std::string& python, const std::vector<double>& values, const std::string& dtype) {
  char path[] = "/tmp/fplab_numpy_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return std::nan("");
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    for (double v : values) {
      if (dtype == "float32") {
        const auto f = static_cast<float>(v);
        out.write(reinterpret_cast<const char*>(&f), sizeof f);
      } else {
        out.write(reinterpret_cast<const char*>(&v), sizeof v);
      }
    }
  }
  const std::string text = python_output(
      python, "import sys, numpy as np; print(float(np.sum(np.fromfile(sys.argv[1], dtype=sys.argv[2]))).hex())",
      {path, dtype});
  std::remove(path);
  // Python's float.hex(), read back exactly by strtod.
  return text.empty() ? std::nan("") : std::strtod(text.c_str(), nullptr);
}

std::string hex(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

// Every n on both sides of NumPy's block edges (8, 128, 8192) and well past one buffer.
constexpr size_t kSizes[] = {1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 16385, 24581, 100000, 1000000};

// Holds the interpreter's NumPy to the preset of its version, on float32 and float64 arrays, and
// checks that the other preset parts from NumPy somewhere past 8192 terms (else this test could
// not tell the two orders apart).
void check_against(const std::string& python, const NumpyVersion& version) {
  const bool current = version.at_least(2, 3);
  const char* const matching = current ? "numpy" : "numpy-2.2";
  const char* const other = current ? "numpy-2.2" : "numpy";
  const Schedule ours = parse_schedule(matching), theirs_not = parse_schedule(other);
  std::mt19937_64 g(42);
  std::normal_distribution<double> d;
  for (const auto& [dtype, format] : {std::pair{"float32", fplab::fp::fp32()}, {"float64", fplab::fp::fp64()}}) {
    Arithmetic arithmetic;
    arithmetic.format = format;
    int other_differs = 0;
    for (size_t n : kSizes) {
      std::vector<double> x(n);
      for (auto& v : x) {
        v = d(g) * std::exp(3 * d(g));
        if (format == fplab::fp::fp32()) v = static_cast<float>(v);
      }
      const double expected = numpy_sum(python, x, dtype);
      const double got = reduce(ours, x, arithmetic);
      INFO(python << " (NumPy " << version.text << "), " << dtype << ", n = " << n << ": numpy says " << hex(expected)
                  << ", preset " << matching << " says " << hex(got));
      REQUIRE(!std::isnan(expected));
      CHECK(expected == got);
      other_differs += reduce(theirs_not, x, arithmetic) != expected;
    }
    INFO(dtype << ": preset " << other << " should differ from NumPy " << version.text << " at some n > 8192");
    CHECK(other_differs > 0);
  }
}

}  // namespace

TEST_CASE("numpy-2.2 preset == Debian's NumPy 1.24 numpy.sum bit for bit, float32 and float64, n to 10^6") {
  const std::string python = "/usr/bin/python3";
  const NumpyVersion version = numpy_version(python);
  if (version.text.empty()) {
    WARN("SKIPPED: /usr/bin/python3 with numpy not found (scripts/setup installs python3-numpy)");
    return;
  }
  check_against(python, version);
}

TEST_CASE("numpy preset == NumPy >= 2.3 numpy.sum bit for bit, float32 and float64, n to 10^6") {
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
