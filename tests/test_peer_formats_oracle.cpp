// Regime: peers as oracles. fplab's ML formats and roundings held to the libraries their users
// know, run for real from the virtual environment scripts/setup makes (build/numpy-venv):
// ml_dtypes 0.6.0 (every bit pattern decoded, and seeded doubles converted to nearest even: from
// float32 it rounds once, as fplab does; from float64 it rounds through float32, twice) and
// Graphcore's gfloat 0.5.2 (round_float in the directed and nearest modes, with and without
// saturation, and its StochasticFastest rounding with given random bits, which is fplab's
// sr_bits/sr_random). Where a peer makes a documented different choice (ml_dtypes drops NaN
// payloads, turns NaN into the opposite-signed zero in FP6/FP4, gives e8m0's least value below
// it; gfloat raises where a format has neither NaN nor infinity) or errs in a way stated here
// (gfloat decides rna and SR with a floating-point addition that can round), the input is left
// out and counted, never compared loosely.
// Skips in one WARN line where the environment is missing, and fails under CI=true.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "tests/python_output.hpp"

namespace fp = fplab::fp;
namespace test = fplab::test;

namespace {

// argv: inputs file (doubles), r_bits file (uint32 pairs R, r per input), output file.
// Writes one line per (library, format, mode, saturation) and prints "ok".
constexpr const char* kScript = R"(
import sys, numpy as np, ml_dtypes, gfloat
from gfloat import formats as gf
x = np.fromfile(sys.argv[1], dtype=np.float64)
sr = np.fromfile(sys.argv[2], dtype=np.uint32).reshape(-1, 2)
out = open(sys.argv[3], 'w')
for name in sys.argv[4].split(','):
    t = getattr(ml_dtypes, name)
    width = 16 if name == 'bfloat16' else 8
    for source in (x, x.astype(np.float32)):
        with np.errstate(all='ignore'):
            y = source.astype(t)
        out.write(' '.join('%x' % v for v in y.view(np.uint16 if width == 16 else np.uint8)) + '\n')
    patterns = np.arange(2 ** min(width, 8 if name != 'bfloat16' else 16), dtype=np.uint16 if width == 16 else np.uint8)
    if name.startswith('float6'):
        patterns = patterns[patterns < 64]
    if name.startswith('float4'):
        patterns = patterns[patterns < 16]
    decoded = patterns.view(t).astype(np.float64)
    out.write(' '.join('%x' % v for v in decoded.view(np.uint64)) + '\n')
modes = [gfloat.RoundMode.TiesToEven, gfloat.RoundMode.TiesToAway, gfloat.RoundMode.TowardZero,
         gfloat.RoundMode.TowardPositive, gfloat.RoundMode.TowardNegative]
def value(fi, v, **kw):
    try:
        return float(gfloat.round_float(fi, float(v), **kw)).hex()
    except ValueError:
        return 'raise'
for name in sys.argv[5].split(','):
    fi = getattr(gf, name)
    for mode in modes:
        for sat in (False, True):
            out.write(' '.join(value(fi, v, rnd=mode, sat=sat) for v in x) + '\n')
    out.write(' '.join(value(fi, v, rnd=gfloat.RoundMode.StochasticFastest, sat=True, srbits=int(s[1]),
                             srnumbits=int(s[0])) for v, s in zip(x, sr)) + '\n')
print('ok')
)";

// ml_dtypes' names, which fplab's parse_format accepts.
const char* const kMlDtypes[] = {"float8_e4m3fn",   "float8_e5m2",     "float8_e4m3",        "float8_e3m4",
                                 "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float6_e3m2fn",
                                 "float6_e2m3fn",   "float4_e2m1fn",   "float8_e8m0fnu",     "bfloat16"};

struct GfloatFormat {
  const char* name;  // gfloat.formats' name
  const char* fplab;
};
const GfloatFormat kGfloat[] = {{"format_info_ocp_e4m3", "e4m3"},   {"format_info_ocp_e5m2", "e5m2"},
                                {"format_info_ocp_e3m2", "e3m2fn"}, {"format_info_ocp_e2m3", "e2m3fn"},
                                {"format_info_ocp_e2m1", "e2m1fn"}, {"format_info_binary16", "fp16"},
                                {"format_info_bfloat16", "bf16"}};
const fp::Mode kModes[] = {fp::Mode::rne, fp::Mode::rna, fp::Mode::rz, fp::Mode::ru, fp::Mode::rd};

// Doubles that reach every corner: seeded values over 2^-160..2^160, the midpoints between
// neighbours of every format (ties) and a hair either side, both infinities, canonical NaNs of
// both signs, zeros of both signs.
std::vector<double> inputs() {
  std::mt19937_64 g(0x9ee5);
  std::vector<double> x = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 448.0, 464.0, 480.0, 57344.0, 61440.0, 7.0, 6.5};
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  for (int i = 0; i < 1500; ++i) {
    const double v = std::ldexp(unit(g), static_cast<int>(g() % 320) - 160);
    x.push_back(g() % 2 ? -v : v);
  }
  for (const char* name : {"e4m3", "e5m2", "e2m1fn", "e3m2fn", "e2m3fn", "bf16", "e4m3fnuz", "e3m4"}) {
    const fp::Format f = fp::parse_format(name);
    for (int i = 0; i < 150; ++i) {
      const uint64_t bits = g() % (uint64_t{1} << (f.width() - 1));
      const double a = f.decode(bits), b = f.decode(bits + 1);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const double mid = a + (b - a) / 2;
      for (double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)}) x.push_back(g() % 2 ? -v : v);
    }
  }
  return x;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Whether gfloat's test `delta + c >= 1.0` can decide wrongly for x: delta is the part of x's
// significand below the format's last place, as gfloat's round_float computes it; the test errs
// when the addition rounds up onto 1.0 from below (delta a hair below the tie, bits far down).
bool gfloat_test_can_err(double x, const fp::Format& f, double c) {
  int e = 0;
  std::frexp(std::fabs(x), &e);
  const int expval = std::max(e - 1, 1 - f.bias()) - f.precision() + 1;
  const double significand = std::ldexp(std::fabs(x), -expval);
  const double delta = significand - std::floor(significand);
  const double sum = delta + c, c_part = sum - delta;  // TwoSum: the addition's error is exact
  return sum == 1.0 && (delta - (sum - c_part)) + (c - c_part) != 0;
}

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

}  // namespace

TEST_CASE(
    "ML formats == ml_dtypes 0.6.0 and gfloat 0.5.2: every pattern, seeded doubles, 5 modes, saturation, SR bits") {
  const char* const chosen = std::getenv("FPLAB_PEERS_PYTHON");
  const std::string python = chosen && *chosen ? chosen : "python3";
  const std::vector<double> x = inputs();
  std::mt19937_64 g(0x5b);
  std::vector<uint32_t> sr;  // (R, r) per input
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t r_bits = 1 + static_cast<uint32_t>(g() % 24);
    sr.push_back(r_bits);
    sr.push_back(static_cast<uint32_t>(g() & ((uint64_t{1} << r_bits) - 1)));
  }
  char in_path[] = "/tmp/fplab_peers_in_XXXXXX", sr_path[] = "/tmp/fplab_peers_sr_XXXXXX",
       out_path[] = "/tmp/fplab_peers_out_XXXXXX";
  for (char* path : {in_path, sr_path, out_path}) {
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
  }
  std::ofstream(in_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(double)));
  std::ofstream(sr_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(sr.data()), static_cast<std::streamsize>(sr.size() * sizeof(uint32_t)));
  std::string ml_names, gf_names;
  for (const char* name : kMlDtypes) ml_names += (ml_names.empty() ? "" : ",") + std::string(name);
  for (const GfloatFormat& f : kGfloat) gf_names += (gf_names.empty() ? "" : ",") + std::string(f.name);
  const std::string status = test::python_output(python, kScript, {in_path, sr_path, out_path, ml_names, gf_names});
  std::ifstream lines_in(out_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(lines_in, line);) lines.push_back(line);
  for (const char* path : {in_path, sr_path, out_path}) std::remove(path);
  if (status != "ok") {
    const char* const ci = std::getenv("CI");
    if (ci && std::string(ci) == "true")
      FAIL("no ml_dtypes/gfloat in " << python << " under CI: scripts/setup installs them");
    WARN("SKIPPED: no ml_dtypes 0.6 and gfloat 0.5 in " << python << " ("
                                                        << (status.empty() ? "it did not run" : status)
                                                        << "); scripts/setup installs them into build/numpy-venv, or "
                                                           "set FPLAB_PEERS_PYTHON to an interpreter that has them");
    return;
  }
  REQUIRE(lines.size() == 3 * std::size(kMlDtypes) + std::size(kGfloat) * (2 * std::size(kModes) + 1));
  size_t line = 0, compared = 0, left_out = 0, double_rounded = 0, gfloat_inexact = 0;

  for (const char* name : kMlDtypes) {
    const fp::Format f = fp::parse_format(name);
    INFO("ml_dtypes " << name << " = fplab " << f.name);
    const auto from_double = split(lines[line++]), from_float = split(lines[line++]);
    REQUIRE(from_double.size() == x.size());
    REQUIRE(from_float.size() == x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      // ml_dtypes' one documented different choice: NaN into FP6/FP4 gives the opposite zero.
      if (std::isnan(x[i]) && !f.has_nan()) {
        ++left_out;
        continue;
      }
      const double as_float = static_cast<float>(x[i]);
      INFO("x = " << std::hexfloat << x[i] << std::defaultfloat);
      // e8m0 has nothing below 2^-127: ml_dtypes gives that least value, fplab NaN (its value
      // with --saturate). And ml_dtypes sends every float32 subnormal above 2^-127 to 2^-126,
      // even 1.02 * 2^-127: fplab rounds them to the nearer power of two.
      if (f == fp::e8m0() && as_float > 0 && as_float < 0x1p-126) {
        if (as_float < 0x1p-127) {
          CHECK(std::stoull(from_float[i], nullptr, 16) == 0);
          CHECK(fp::round_double(as_float, f, {fp::Mode::rne, false, true}).bits == 0);
        } else if (as_float > 0x1p-127) {
          CHECK(std::stoull(from_float[i], nullptr, 16) == 1);
        }
        ++left_out;
        continue;
      }
      // From float32 ml_dtypes rounds once, as fplab does.
      CHECK(fp::round_double(as_float, f, {fp::Mode::rne}).bits == std::stoull(from_float[i], nullptr, 16));
      // From float64 it goes through float32 first: twice rounded, which fplab never is. Every
      // disagreement is that, and only that.
      const uint64_t ml = std::stoull(from_double[i], nullptr, 16);
      CHECK(fp::round_double(as_float, f, {fp::Mode::rne}).bits == ml);
      double_rounded += fp::round_double(x[i], f, {fp::Mode::rne}).bits != ml;
      compared += 2;
    }
    const auto decoded = split(lines[line++]);
    REQUIRE(decoded.size() == (uint64_t{1} << f.width()));
    for (uint64_t bits = 0; bits < decoded.size(); ++bits) {
      INFO("pattern " << bits);
      CHECK(same_value(f.decode(bits), std::bit_cast<double>(std::stoull(decoded[bits], nullptr, 16))));
      ++compared;
    }
  }

  for (const GfloatFormat& gf : kGfloat) {
    const fp::Format f = fp::parse_format(gf.fplab);
    for (fp::Mode mode : kModes)
      for (bool sat : {false, true}) {
        INFO("gfloat " << gf.name << " = fplab " << f.name << " mode " << fp::mode_name(mode) << " sat " << sat);
        const auto values = split(lines[line++]);
        REQUIRE(values.size() == x.size());
        fp::RoundingOptions options{mode, false, sat};
        options.saturate_infinities = sat;  // gfloat's sat: infinities too
        for (size_t i = 0; i < x.size(); ++i) {
          if (values[i] == "raise") {  // no NaN and no infinity, not saturating: gfloat refuses
            CHECK((!f.has_nan() || (std::isnan(x[i]) && !f.has_nan())));
            ++left_out;
            continue;
          }
          if (mode == fp::Mode::rna && std::isfinite(x[i]) && gfloat_test_can_err(x[i], f, 0.5)) {
            ++gfloat_inexact;
            continue;
          }
          INFO("x = " << std::hexfloat << x[i] << std::defaultfloat << ": gfloat " << values[i]);
          CHECK(same_value(fp::round_double(x[i], f, options).value, std::strtod(values[i].c_str(), nullptr)));
          ++compared;
        }
      }
    const auto stochastic = split(lines[line++]);
    INFO("gfloat " << gf.name << " StochasticFastest = fplab " << f.name << " sr with sr_bits, sr_random");
    for (size_t i = 0; i < x.size(); ++i) {
      if (stochastic[i] == "raise" || std::isnan(x[i])) {
        ++left_out;
        continue;
      }
      if (std::isfinite(x[i]) &&
          gfloat_test_can_err(x[i], f, std::ldexp(sr[2 * i + 1], -static_cast<int>(sr[2 * i])))) {
        ++gfloat_inexact;
        continue;
      }
      fp::RoundingOptions options{fp::Mode::sr, false, true};
      options.saturate_infinities = true;
      options.sr_bits = static_cast<int>(sr[2 * i]);
      options.sr_random = sr[2 * i + 1];
      INFO("x = " << std::hexfloat << x[i] << std::defaultfloat << " R " << sr[2 * i] << " r " << sr[2 * i + 1]);
      CHECK(same_value(fp::round_double(x[i], f, options).value, std::strtod(stochastic[i].c_str(), nullptr)));
      ++compared;
    }
  }
  CHECK(double_rounded > 0);  // the inputs reach ties a hair off, where double rounding shows
  WARN("compared " << compared << " results with ml_dtypes and gfloat; left out " << left_out
                   << " (NaN into FP6/FP4 and e8m0 below 2^-126 in ml_dtypes; gfloat's refusals); ml_dtypes rounded "
                   << double_rounded << " float64 inputs twice (through float32); gfloat's tie test rounded onto 1 for "
                   << gfloat_inexact << " (left out)");
}
