// Regime: randomness. Philox4x32-10 against an independent implementation written here from
// the paper (Salmon et al., SC'11) and its published known-answer vectors; CounterRng's
// replay, key and stream separation; and stochastic rounding: every result is one of the two
// neighbours the MPFR reference names, the mean of many roundings equals x (within 5 standard
// errors), one draw per inexact rounding, same key => same bits, different key => different.
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "fp/counter_rng.hpp"
#include "fp/exact_value.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/round.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

// Philox4x32 with 10 rounds, straight from the definition: each round multiplies words 0 and
// 2 by the two constants, crosses the halves and xors in the round key; the key is bumped by
// the Weyl constants between rounds.
std::array<uint32_t, 4> philox_reference(std::array<uint32_t, 4> x, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    const uint64_t a = uint64_t{0xD2511F53u} * x[0];
    const uint64_t b = uint64_t{0xCD9E8D57u} * x[2];
    const uint32_t hi_a = a >> 32, lo_a = static_cast<uint32_t>(a);
    const uint32_t hi_b = b >> 32, lo_b = static_cast<uint32_t>(b);
    x = {hi_b ^ x[1] ^ k[0], lo_b, hi_a ^ x[3] ^ k[1], lo_a};
  }
  return x;
}

}  // namespace

TEST_CASE(
    "philox4x32-10: known-answer vectors and 10^5 random (counter, key) agree with an "
    "independent implementation",
    "[rng]") {
  // Known-answer vectors published with Random123 (kat_vectors: philox4x32 10).
  struct Kat {
    std::array<uint32_t, 4> counter;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> out;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  // fp::philox4x32_10 returns the first two output words, as one number (all CounterRng uses).
  const auto ours = [](const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
    return fp::philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1]);
  };
  const auto first_two = [](const std::array<uint32_t, 4>& out) { return (uint64_t{out[0]} << 32) | out[1]; };
  for (const Kat& kat : kats) {
    CHECK(philox_reference(kat.counter, kat.key) == kat.out);
    CHECK(ours(kat.counter, kat.key) == first_two(kat.out));
  }
  std::mt19937_64 rng(31337);
  size_t mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    std::array<uint32_t, 4> c;
    std::array<uint32_t, 2> k;
    for (auto& w : c) w = static_cast<uint32_t>(rng());
    for (auto& w : k) w = static_cast<uint32_t>(rng());
    if (ours(c, k) != first_two(philox_reference(c, k))) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("counter stream: a mixed key's prefix finished by mix_word, and Lemire's draw, as the GPU uses them") {
  // sim/cuda/gpu_seeded.cu mixes (impl seed, op, call) on the host and the tile on the device, and
  // draws Fisher-Yates runs from known positions with CounterRng::lemire: both must be what the
  // CPU's mix_key and below() give. Exact 128-bit arithmetic is the reference for the draw.
  std::mt19937_64 rng(4242);
  size_t wrong = 0;
  for (int t = 0; t < 20000; ++t) {
    const uint64_t a = rng(), b = rng(), c = rng(), d = rng() % 4096;
    wrong += fp::mix_word(fp::mix_key({a, b, c}), d) != fp::mix_key({a, b, c, d});
    const uint64_t bound = t % 2 ? rng() % 100000 + 1 : rng() | 1, x = rng();
    uint64_t draw = 0;
    const unsigned __int128 product = static_cast<unsigned __int128>(x) * bound;
    const auto low = static_cast<uint64_t>(product);
    const bool taken = low >= (0 - bound) % bound;  // Lemire: reject the low products below 2^64 mod bound
    wrong += fp::CounterRng::lemire(x, bound, draw) != taken || draw != static_cast<uint64_t>(product >> 64);
    fp::CounterRng stream(a, b), again(a, b);
    uint64_t first = 0;
    const bool one_number = fp::CounterRng::lemire(again.at(0), bound, first);
    wrong += one_number && stream.below(bound) != first;
  }
  CHECK(wrong == 0);
}

TEST_CASE(
    "counter_rng: next() replays at(n); seek; same key and stream => same sequence; "
    "different key or stream => different; uniform in [0,1); below(bound) < bound and "
    "uniform; mix_key separates tuples",
    "[rng]") {
  fp::CounterRng a(42, 7), b(42, 7), other_key(43, 7), other_stream(42, 8);
  std::vector<uint64_t> seq;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    seq.push_back(x);
    REQUIRE(x == a.at(i));
    REQUIRE(x == b.next());
  }
  CHECK(a.position() == 1000);
  a.seek(500);
  CHECK(a.next() == seq[500]);
  size_t same_key = 0, same_stream = 0;
  for (int i = 0; i < 1000; ++i) {
    same_key += other_key.next() == seq[i];
    same_stream += other_stream.next() == seq[i];
  }
  CHECK(same_key == 0);
  CHECK(same_stream == 0);
  CHECK(std::set<uint64_t>(seq.begin(), seq.end()).size() == seq.size());

  fp::CounterRng u(9);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = u.uniform();
    REQUIRE(x >= 0.0);
    REQUIRE(x < 1.0);
    sum += x;
  }
  CHECK(std::abs(sum / n - 0.5) < 5 * std::sqrt(1.0 / 12 / n));

  for (uint64_t bound :
       {uint64_t{1}, uint64_t{3}, uint64_t{6}, uint64_t{1000003}, (uint64_t{1} << 63) + 1, ~uint64_t{0}}) {
    fp::CounterRng r(bound);
    for (int i = 0; i < 10000; ++i) REQUIRE(r.below(bound) < bound);
  }
  {
    fp::CounterRng r(123);
    std::array<int, 6> counts{};
    const int draws = 60000;
    for (int i = 0; i < draws; ++i) ++counts[r.below(6)];
    const double expected = draws / 6.0, sd = std::sqrt(draws * (1.0 / 6) * (5.0 / 6));
    for (int c : counts) CHECK(std::abs(c - expected) < 5 * sd);
  }
  {
    // Every output bit is a fair coin and no two bits are tied together (a stream that repeats
    // one 32-bit word in both halves, say, fails here).
    fp::CounterRng r(2718);
    const int draws = 20000;
    std::vector<uint64_t> xs(draws);
    for (auto& x : xs) x = r.next();
    const double sd1 = std::sqrt(0.25 / draws), sd2 = std::sqrt(0.25 * 0.75 / draws);
    size_t bad_bits = 0, bad_pairs = 0;
    for (int i = 0; i < 64; ++i) {
      size_t ones = 0;
      for (uint64_t x : xs) ones += (x >> i) & 1;
      bad_bits += std::abs(static_cast<double>(ones) / draws - 0.5) > 6 * sd1;
      for (int j = i + 1; j < 64; ++j) {
        size_t both = 0;
        for (uint64_t x : xs) both += ((x >> i) & (x >> j)) & 1;
        bad_pairs += std::abs(static_cast<double>(both) / draws - 0.25) > 6 * sd2;
      }
    }
    CHECK(bad_bits == 0);
    CHECK(bad_pairs == 0);
  }
  CHECK(fp::mix_key({1, 2, 3}) == fp::mix_key({1, 2, 3}));
  std::set<uint64_t> keys;
  for (uint64_t i = 0; i < 64; ++i)
    for (uint64_t j = 0; j < 64; ++j) keys.insert(fp::mix_key({i, j}));
  CHECK(keys.size() == 64 * 64);
  CHECK(fp::mix_key({1, 2}) != fp::mix_key({2, 1}));
}

namespace {

struct Case {
  const char* format;
  double value;     // a value of the format (the lower neighbour in magnitude)
  double fraction;  // x = value + fraction * spacing above value
};

}  // namespace

TEST_CASE(
    "round sr unbiased: for bf16 fp16 fp32 tf32 e4m3 e5m2 at fractions 2^-12..0.9 of the "
    "spacing (normal and subnormal, both signs), every result is a neighbour and the "
    "mean of 400000 roundings is x within 5 standard errors",
    "[sr]") {
  const int n = 400000;
  const Case cases[] = {
      {"bf16", 1.0, 0.5},       {"bf16", 1.0, 0.25},    {"bf16", 1.0, 0.1},        {"bf16", 1.0, 0.9},
      {"bf16", 1.0, 1.0 / 3},   {"bf16", 1.0, 0x1p-12}, {"bf16", 0x1p-130, 0.37},  {"fp16", 3 * 0x1p-24, 0.3},
      {"fp16", 0.0, 0.2},       {"fp16", 0x1p-14, 0.5}, {"fp16", 1000.0, 0.77},    {"fp32", 1.0, 0.7},
      {"fp32", 0x1p-140, 0.05}, {"tf32", 3.0, 0.45},    {"e4m3", 5 * 0x1p-9, 0.6}, {"e4m3", 0.0, 0.5},
      {"e4m3", 416.0, 0.75},    {"e5m2", 1024.0, 0.2},  {"e5m2", 0x1p-16, 0.8},    {"e5m2", 40960.0, 0.55},
  };
  for (const Case& c : cases) {
    const Format format = format_named(c.format);
    const ref::Grid grid(format);
    const ref::Position at = ref::locate(c.value, grid);
    const int64_t quantum = at.kind == ref::Kind::zero ? grid.subnormal_quantum : at.quantum;
    const double spacing = std::ldexp(1.0, static_cast<int>(quantum));
    for (double sign : {1.0, -1.0}) {
      const double x = sign * (c.value + c.fraction * spacing);
      const auto want = ref::round(x, format, Mode::sr, false, false);
      REQUIRE(want.size() == 2);
      fp::CounterRng stream(fp::mix_key({0x5eed, static_cast<uint64_t>(c.fraction * 1e6)}));
      fp::RoundingOptions options{Mode::sr, false, false, &stream};
      long double sum = 0;
      size_t outside = 0, up = 0;
      for (int i = 0; i < n; ++i) {
        const fp::Rounded r = fp::round_double(x, format, options);
        if (r.bits == want[1].bits)
          ++up;
        else if (r.bits != want[0].bits)
          ++outside;
        sum += r.value;
      }
      INFO("sr " << c.format << " x = " << show(x) << " fraction " << c.fraction << " spacing " << show(spacing)
                 << ": up " << up << " of " << n);
      CHECK(outside == 0);
      CHECK(stream.position() == static_cast<uint64_t>(n));  // one draw per inexact rounding
      const double se = spacing * std::sqrt(c.fraction * (1 - c.fraction) / n);
      const double mean = static_cast<double>(sum / n);
      INFO("mean " << show(mean) << " standard error " << se);
      CHECK(std::abs(mean - x) <= 5 * se);
    }
  }
}

TEST_CASE(
    "round sr overflow: e4m3 460 gives 448 or NaN (NaN with probability 12/32), 448 always "
    "when saturating; e5m2 60000 gives 57344 or inf",
    "[sr]") {
  const int n = 200000;
  struct Over {
    const char* format;
    double x;
    double p_up;
  };
  for (const Over& o : {Over{"e4m3", 460.0, 12.0 / 32}, Over{"e5m2", 60000.0, 2656.0 / 8192}}) {
    const Format format = format_named(o.format);
    for (bool saturate : {false, true}) {
      fp::CounterRng stream(77);
      fp::RoundingOptions options{Mode::sr, false, saturate, &stream};
      const auto want = ref::round(o.x, format, Mode::sr, false, saturate);
      size_t up = 0, outside = 0;
      for (int i = 0; i < n; ++i) {
        const fp::Rounded r = fp::round_double(o.x, format, options);
        if (r.overflow) ++up;
        if (r.bits != want[0].bits && r.bits != want[1].bits) ++outside;
      }
      INFO("sr " << o.format << " x = " << o.x << " saturate " << saturate << ": overflowed " << up << " of " << n);
      CHECK(outside == 0);
      CHECK(std::abs(static_cast<double>(up) / n - o.p_up) <= 5 * std::sqrt(o.p_up * (1 - o.p_up) / n));
    }
  }
}

TEST_CASE(
    "round sr replay: same key => identical bits; different key or stream => different "
    "sequences; exact inputs draw nothing; no stream => std::logic_error",
    "[sr]") {
  const Format bf16 = format_named("bf16");
  std::mt19937_64 rng(5);
  std::vector<double> xs;
  for (int i = 0; i < 2000; ++i) xs.push_back(random_significand(rng, static_cast<int>(rng() % 40) - 20));
  auto run = [&](uint64_t key, uint64_t stream_id) {
    fp::CounterRng stream(key, stream_id);
    fp::RoundingOptions options{Mode::sr, false, false, &stream};
    std::vector<uint64_t> bits;
    for (double x : xs) bits.push_back(fp::round_double(x, bf16, options).bits);
    return bits;
  };
  CHECK(run(1, 0) == run(1, 0));
  CHECK(run(1, 0) != run(2, 0));
  CHECK(run(1, 0) != run(1, 1));

  fp::CounterRng stream(3);
  fp::RoundingOptions options{Mode::sr, false, false, &stream};
  for (double exact : {1.0, -0.0, 0x1p-133, 3.0, 0x1.fep127}) {
    INFO("exact bf16 value " << show(exact));
    const fp::Rounded r = fp::round_double(exact, bf16, options);
    CHECK(r.value == exact);
    CHECK_FALSE(r.inexact);
  }
  CHECK(stream.position() == 0);
  fp::RoundingOptions no_stream{Mode::sr, false, false, nullptr};
  CHECK_THROWS_AS(fp::round_double(1 + 0x1p-9, bf16, no_stream), std::logic_error);
}

TEST_CASE(
    "round_exact sr with sticky: bf16 1 + 2^-8 + 2^-80 (just above half) and 1 + 2^-70 "
    "(far below half) give neighbours with the right frequencies",
    "[sr]") {
  const Format bf16 = format_named("bf16");
  const int n = 400000;
  // 1 + 2^-8 + tail: significand 1.00000001 (binary), the tail only in sticky.
  fp::ExactValue half_plus;
  half_plus.kind = fp::ExactValue::Kind::finite;
  half_plus.exponent = 0;
  half_plus.significand = (uint64_t{1} << 63) | (uint64_t{1} << 55);
  half_plus.sticky = true;
  fp::ExactValue tiny = half_plus;
  tiny.significand = uint64_t{1} << 63;  // 1 + (something below 2^-63)
  for (const auto& [v, p] : {std::pair{half_plus, 0.5}, std::pair{tiny, 0.0}}) {
    fp::CounterRng stream(11);
    fp::RoundingOptions options{Mode::sr, false, false, &stream};
    size_t up = 0, outside = 0;
    for (int i = 0; i < n; ++i) {
      const double r = fp::round_exact(v, bf16, options).value;
      if (r == 1 + 0x1p-7)
        ++up;
      else if (r != 1.0)
        ++outside;
    }
    INFO("sr bf16 of " << show(v) << ": up " << up << " of " << n);
    CHECK(outside == 0);
    CHECK(std::abs(static_cast<double>(up) / n - p) <= 5 * std::sqrt(0.25 / n) + 1e-12);
  }
}

namespace {

// The dropped part of |x| below its lower neighbour, as an R-bit integer truncated from the exact
// fraction (|x| / 2^quantum - low), from the MPFR reference's position and x's own bits.
uint64_t truncated_fraction(double x, const ref::Position& at, int r_bits) {
  const fp::DoubleParts parts = fp::split_double(x);
  const int64_t dropped = at.quantum - parts.scale;  // bits of x's significand below the quantum
  REQUIRE(dropped > 0);
  const unsigned __int128 below = dropped >= 64 ? parts.significand
                                                : parts.significand & ((uint64_t{1} << dropped) - 1);
  if (dropped >= r_bits) return dropped - r_bits >= 64 ? 0 : static_cast<uint64_t>(below >> (dropped - r_bits));
  return static_cast<uint64_t>(below << (r_bits - dropped));
}

}  // namespace

TEST_CASE(
    "round sr with R random bits given by the caller: up exactly when the R-bit truncated "
    "dropped part plus the bits carries, for R 1..64 and 20000 seeded inputs per format",
    "[sr]") {
  std::mt19937_64 rng(0x5b175);
  for (const char* name : {"bf16", "fp16", "e4m3", "e5m2", "e2m1fn", "tf32", "fp32"}) {
    const Format format = format_named(name);
    const ref::Grid grid(format);
    MismatchLog log("sr bits " + std::string(name));
    for (int i = 0; i < 20000; ++i) {
      const double x = (rng() & 1 ? -1.0 : 1.0) * std::ldexp(random_significand(rng, 0), static_cast<int>(rng() % 24) - 12);
      const ref::Position at = ref::locate(x, grid);
      if (at.kind != ref::Kind::finite || at.exact) continue;
      const auto want = ref::round(x, format, Mode::sr, false, true);
      const int r_bits = 1 + static_cast<int>(rng() % 64);
      const uint64_t r = rng();
      const uint64_t t = truncated_fraction(x, at, r_bits);
      const unsigned __int128 sum = static_cast<unsigned __int128>(t) +
                                    (r_bits == 64 ? r : r & ((uint64_t{1} << r_bits) - 1));
      const bool up = (sum >> r_bits) != 0;
      fp::RoundingOptions options{Mode::sr, false, true};
      options.sr_bits = r_bits;
      options.sr_random = r;
      const fp::Rounded got = fp::round_double(x, format, options);
      if (got.bits != want[up ? 1 : 0].bits)
        log.fail(std::string(name) + " x " + show(x) + " R " + std::to_string(r_bits) + " r " + std::to_string(r) +
                 ": expected " + (up ? "up" : "down"));
      else
        log.pass();
    }
    log.require_none();
  }
}

TEST_CASE(
    "round sr with R bits from the stream: the chance of rounding up is the R-bit truncated "
    "dropped part (a part below 2^-R ulp never rounds up); R = 64 is the default's draw",
    "[sr]") {
  const Format bf16 = format_named("bf16");
  const int n = 200000;
  // 1 + 0.7 ulp + 2^-20 ulp: with R = 2 the chance is 0.5 (0.7 truncated to 2 bits), with R = 8
  // 179/256, with R = 64 the exact fraction.
  const double x = 1 + 0x1p-7 * (0.7 + 0x1p-20);
  for (const auto& [r_bits, p] : {std::pair{2, 0.5}, {8, 179.0 / 256}, {64, 0.7 + 0x1p-20}}) {
    fp::CounterRng stream(21);
    fp::RoundingOptions options{Mode::sr, false, false, &stream};
    options.sr_bits = r_bits;
    size_t up = 0;
    for (int i = 0; i < n; ++i) up += fp::round_double(x, bf16, options).value > x;
    INFO("R " << r_bits << ": up " << up << " of " << n);
    CHECK(std::abs(static_cast<double>(up) / n - p) <= 5 * std::sqrt(p * (1 - p) / n));
  }
  // A dropped part below 2^-R ulp: never up.
  fp::CounterRng stream(22);
  fp::RoundingOptions options{Mode::sr, false, false, &stream};
  options.sr_bits = 10;
  for (int i = 0; i < 10000; ++i) CHECK(fp::round_double(1 + 0x1p-7 * 0x1p-11, bf16, options).value == 1.0);
  // R = 64 draws what the default draws.
  fp::CounterRng a(23), b(23);
  fp::RoundingOptions default_options{Mode::sr, false, false, &a}, explicit_options{Mode::sr, false, false, &b};
  explicit_options.sr_bits = 64;
  for (int i = 0; i < 1000; ++i) {
    const double v = 1 + 0x1p-7 * (i / 1000.0);
    CHECK(fp::round_double(v, bf16, default_options).bits == fp::round_double(v, bf16, explicit_options).bits);
  }
  options.sr_bits = 0;
  CHECK_THROWS_AS(fp::round_double(1 + 0x1p-9, bf16, options), std::invalid_argument);
  options.sr_bits = 65;
  CHECK_THROWS_AS(fp::round_double(1 + 0x1p-9, bf16, options), std::invalid_argument);
}
