// fplab's MX block conversion (fp/mx_block.hpp) against Graphcore's gfloat 0.5.2 itself: seeded
// random blocks of 32 (zeros, NaN, infinities, huge and tiny magnitudes, up to 60 binades within a
// block) in every MX element format and every rounding mode gfloat has, each block encoded by
// gfloat's compute_scale_amax + encode_block (the steps of its quantize_block). The interpreter:
// $FPLAB_GFLOAT_PYTHON (ctest points it at build/numpy-venv, which scripts/setup fills from PyPI),
// else python3; without gfloat the test is skipped with a warning, except under CI (CI=true).
//
// Where the two differ by design (docs/formats-and-rounding.md, "MX block scaling"):
// - a NaN element code: gfloat writes 0xff, fplab its canonical NaN (0x7f, 0x7e): NaN-ness compared;
// - a block with a NaN in FP6/FP4 (no NaN code): gfloat raises, fplab gives the NaN scale and +0s;
// - gfloat divides v / X in doubles first: where that quotient is below 2^-1022 it is already
//   rounded, and the directed modes may then differ from fplab's one exact rounding (not compared).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fp/mx_block.hpp"
#include "tests/python_output.hpp"

using namespace fplab;

namespace {

constexpr size_t kBlock = 32;

// gfloat's names for the element formats and the rounding modes, beside fplab's.
const std::pair<const char*, fp::Format> kFormats[] = {{"mxfp8_e4m3", fp::e4m3()},
                                                       {"mxfp8_e5m2", fp::e5m2()},
                                                       {"mxfp6_e3m2", fp::e3m2fn()},
                                                       {"mxfp6_e2m3", fp::e2m3fn()},
                                                       {"mxfp4_e2m1", fp::e2m1fn()}};
const std::pair<const char*, fp::Mode> kModes[] = {{"TiesToEven", fp::Mode::rne},
                                                   {"TiesToAway", fp::Mode::rna},
                                                   {"TowardZero", fp::Mode::rz},
                                                   {"TowardPositive", fp::Mode::ru},
                                                   {"TowardNegative", fp::Mode::rd}};

// Reads the doubles file argv[1], writes one line per (format, mode, block) to argv[2]: the codes
// in hex (scale first), or "raise" where gfloat refuses the block.
constexpr const char* kScript = R"(
import sys, warnings
import numpy as np
try:
    import gfloat
    from gfloat.block import compute_scale_amax, encode_block
    from gfloat.formats import format_info_mxfp8_e4m3
except ImportError:
    print("skip: no gfloat"); sys.exit()
warnings.simplefilter("ignore")
values = np.fromfile(sys.argv[1], dtype=np.float64)
block = int(sys.argv[3])
with open(sys.argv[2], "w") as out:
    for name in sys.argv[4].split(","):
        fi = getattr(gfloat.formats, "format_info_" + name)
        for mode in sys.argv[5].split(","):
            rnd = getattr(gfloat.RoundMode, mode)
            for first in range(0, len(values), block):
                vals = values[first:first + block]
                with np.errstate(all="ignore"):
                    scale = compute_scale_amax(fi.etype.emax, vals)
                    scaled = vals / scale
                try:
                    codes = list(encode_block(fi, scale, scaled, rnd))
                    out.write(" ".join("%x" % c for c in codes) + "\n")
                except ValueError:
                    out.write("raise\n")
print("ok " + gfloat.__version__ if hasattr(gfloat, "__version__") else "ok")
)";

std::vector<double> random_blocks(size_t count) {
  std::mt19937_64 g(2019);
  std::normal_distribution<double> normal;
  std::vector<double> v(count * kBlock);
  for (size_t b = 0; b < count; ++b) {
    const int centre = static_cast<int>(g() % 560) - 280, spread = static_cast<int>(g() % 60);
    const uint64_t special = g() % 10;  // 0: a NaN in the block, 1: an infinity, 2: all zero, 3: a 2^-1060
    for (size_t i = 0; i < kBlock; ++i) {
      double& x = v[b * kBlock + i];
      const uint64_t kind = g() % 16;
      x = kind == 0 ? 0.0 : kind == 1 ? -0.0 : std::ldexp(normal(g), centre - static_cast<int>(g() % (spread + 1)));
      if (b % 3 == 0) x = static_cast<float>(x);  // float data, where fplab's GEMMs take MX factors
      if (special == 2) x = i % 2 ? 0.0 : -0.0;
    }
    if (special == 0) v[b * kBlock + g() % kBlock] = std::numeric_limits<double>::quiet_NaN();
    if (special == 1) v[b * kBlock + g() % kBlock] = g() % 2 ? INFINITY : -INFINITY;
    if (special == 3) v[b * kBlock + g() % kBlock] = std::ldexp(normal(g), -1060);  // its quotient: below 2^-1022
  }
  return v;
}

}  // namespace

TEST_CASE("mx_quantize == gfloat 0.5.2's compute_scale_amax + encode_block, 5 element formats x 5 modes") {
  const char* const chosen = std::getenv("FPLAB_GFLOAT_PYTHON");
  const std::string python = chosen && *chosen ? chosen : "python3";
  const std::vector<double> values = random_blocks(600);
  char in_path[] = "/tmp/fplab_mx_in_XXXXXX", out_path[] = "/tmp/fplab_mx_out_XXXXXX";
  const int in_fd = mkstemp(in_path), out_fd = mkstemp(out_path);
  REQUIRE(in_fd >= 0);
  REQUIRE(out_fd >= 0);
  close(in_fd), close(out_fd);
  std::ofstream(in_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(double)));
  std::string names, modes;
  for (const auto& [name, format] : kFormats) names += (names.empty() ? "" : ",") + std::string(name);
  for (const auto& [name, mode] : kModes) modes += (modes.empty() ? "" : ",") + std::string(name);
  const std::string status =
      test::python_output(python, kScript, {in_path, out_path, std::to_string(kBlock), names, modes});
  std::ifstream lines_in(out_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(lines_in, line);) lines.push_back(line);
  std::remove(in_path), std::remove(out_path);
  if (status.rfind("ok", 0) != 0) {
    const char* const ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL("no gfloat in " << python << " under CI: scripts/setup installs it");
    WARN("SKIPPED: no gfloat in " << python << " (" << (status.empty() ? "it did not run" : status)
                                  << "); scripts/setup installs gfloat into build/numpy-venv, or set "
                                     "FPLAB_GFLOAT_PYTHON to an interpreter that has it");
    return;
  }
  const size_t blocks = values.size() / kBlock;
  REQUIRE(lines.size() == std::size(kFormats) * std::size(kModes) * blocks);
  size_t line = 0, compared = 0, refused = 0, double_rounded = 0, mismatches = 0;
  for (const auto& [name, element] : kFormats)
    for (const auto& [mode_name, mode] : kModes) {
      const fp::MxBlocks ours = fp::mx_quantize(values, element, kBlock, mode);
      for (size_t b = 0; b < blocks; ++b, ++line) {
        INFO(name << " " << mode_name << " block " << b << ": gfloat says " << lines[line]);
        if (lines[line] == "raise") {  // FP6/FP4 cannot encode the NaN of a NaN-scaled block
          CHECK(ours.scale_bits[b] == 0xff);
          CHECK(!element.has_nan());
          ++refused;
          continue;
        }
        std::istringstream codes(lines[line]);
        unsigned scale = 0;
        codes >> std::hex >> scale;
        CHECK(ours.scale_bits[b] == scale);
        const int s = static_cast<int>(scale) - 127;
        for (size_t i = 0; i < kBlock; ++i) {
          const size_t at = b * kBlock + i;
          uint64_t theirs = 0;
          codes >> std::hex >> theirs;
          const double their_value = element.decode(theirs);
          if (scale == 0xff || std::isnan(their_value)) {
            CHECK(std::isnan(ours.dequantized[at]));
            continue;
          }
          // gfloat's double quotient v / X, rounded below 2^-1022 before its own rounding.
          const double quotient = std::ldexp(values[at], -s);
          if (std::isfinite(values[at]) && std::ldexp(quotient, s) != values[at]) {
            ++double_rounded;
            if (mode != fp::Mode::rne && mode != fp::Mode::rna) continue;
          }
          ++compared;
          if (ours.element_bits[at] != theirs) {
            ++mismatches;
            FAIL_CHECK("element " << i << " = " << values[at] << ": fplab " << std::hex << ours.element_bits[at]
                                  << ", gfloat " << theirs);
          }
        }
      }
    }
  INFO(compared << " elements compared, " << mismatches << " differ; " << refused
                << " NaN blocks gfloat refuses in FP6/FP4; " << double_rounded
                << " quotients below 2^-1022 (directed modes not compared)");
  CHECK(compared > 300000);  // and every corner above reached:
  CHECK(refused > 0);
  CHECK(double_rounded > 0);
}
