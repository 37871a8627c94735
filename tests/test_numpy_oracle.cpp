// The numpy preset against NumPy itself: numpy.sum of float32 arrays computed by Debian's
// python3-numpy (installed by scripts/setup) must equal the preset's fp32 result bit for bit.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "sim/engine.hpp"

using namespace fplab::sim;

namespace {

bool numpy_available() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

// numpy.sum(float32 array) as a hex float, or "" on failure.
std::string numpy_sum(const std::vector<float>& x) {
  char path[] = "/tmp/fplab_numpy_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  }
  const std::string command = std::string("/usr/bin/python3 -c \"import numpy as np; ") +
                              "print(float(np.sum(np.fromfile('" + path + "', dtype=np.float32))).hex())\"";
  std::string result;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buffer[128];
    while (std::fgets(buffer, sizeof buffer, p)) result += buffer;
    pclose(p);
  }
  std::remove(path);
  while (!result.empty() && (result.back() == '\n' || result.back() == '\r')) result.pop_back();
  return result;
}

std::string hex(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

}  // namespace

TEST_CASE("numpy preset == numpy.sum(float32) bit for bit, n from 1 to 10^6 (needs python3-numpy)") {
  if (!numpy_available()) {
    WARN("SKIPPED: /usr/bin/python3 with numpy not found (scripts/setup installs python3-numpy)");
    return;
  }
  std::mt19937_64 g(42);
  std::normal_distribution<float> d;
  const Schedule numpy = parse_schedule("numpy");
  for (size_t n : {1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 24581, 100000, 1000000}) {
    std::vector<float> x(n);
    for (auto& v : x) v = d(g) * std::exp(3 * d(g));
    const std::vector<double> values(x.begin(), x.end());
    const double ours = reduce(numpy, values, Arithmetic{});
    // numpy prints Python's float.hex(); normalise both through strtod.
    const std::string theirs = numpy_sum(x);
    INFO("n = " << n << ", numpy says " << theirs << ", fplab says " << hex(ours));
    REQUIRE(!theirs.empty());
    CHECK(std::strtod(theirs.c_str(), nullptr) == ours);
  }
}
