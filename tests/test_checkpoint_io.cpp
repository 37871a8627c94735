// Checkpoint files: atomic replacement, exact round trips of named arrays (every float bit
// pattern kept), and refusal — with one line naming the file — of every truncation, every
// flipped byte, appended bytes, a foreign file and an unknown version.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "models/checkpoint_io.hpp"
#include "util/sha256.hpp"
#include "tests/data_error.hpp"
#include "tests/temp_dir.hpp"

using namespace fplab::models;
using fplab::test::data_error;
using fplab::test::TempDir;
namespace fs = std::filesystem;

namespace {

bool one_line_naming(const std::string& message, const std::string& path) {
  return message.rfind(path + ": ", 0) == 0 && message.find('\n') == std::string::npos;
}

std::vector<float> awkward_floats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          0.1f};
  uint32_t payload_nan = 0x7fc12345;
  float nan;
  std::memcpy(&nan, &payload_nan, 4);
  v.push_back(nan);
  return v;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

CheckpointWriter sample() {
  CheckpointWriter w;
  const std::vector<double> moments = {1e-300, -2.5, 3.0};
  const std::vector<uint64_t> counters = {0, 1, ~uint64_t{0}};
  w.add("layer0.weight", awkward_floats()).add("adam.m", moments).add("rng", counters).add_scalar("step", 1234);
  // Empty arrays of every type (an MLP's optimizer state before its first step): their
  // vectors' data() is null on reading, which the sanitizer build holds to no memcpy.
  w.add("empty", std::span<const float>()).add("empty.f64", std::span<const double>());
  w.add("empty.u64", std::span<const uint64_t>());
  return w;
}

}  // namespace

TEST_CASE("checkpoint: named arrays round-trip bit for bit through a file") {
  TempDir dir;
  const std::string path = dir.file("run.ckpt");
  sample().write(path);
  const CheckpointReader r = CheckpointReader::read(path);
  CHECK(r.names() ==
        std::vector<std::string>{"layer0.weight", "adam.m", "rng", "step", "empty", "empty.f64", "empty.u64"});
  CHECK(same_bits(r.f32("layer0.weight"), awkward_floats()));
  CHECK(std::vector<double>(r.f64("adam.m").begin(), r.f64("adam.m").end()) == std::vector<double>{1e-300, -2.5, 3.0});
  CHECK(std::vector<uint64_t>(r.u64("rng").begin(), r.u64("rng").end()) == std::vector<uint64_t>{0, 1, ~uint64_t{0}});
  CHECK(r.scalar("step") == 1234);
  CHECK(r.f32("empty").empty());
  CHECK(r.f64("empty.f64").empty());
  CHECK(r.u64("empty.u64").empty());
  CHECK(r.has("rng"));
  CHECK_FALSE(r.has("nope"));
  CHECK(one_line_naming(data_error([&] { r.f32("nope"); }), path));
  CHECK(data_error([&] { r.f32("nope"); }).find("no array 'nope'") != std::string::npos);
  CHECK(data_error([&] { r.f32("adam.m"); }).find("'adam.m' holds float64, not float32") != std::string::npos);
  CHECK(data_error([&] { r.scalar("rng"); }).find("3 elements") != std::string::npos);
  CHECK_THROWS_AS(CheckpointWriter().add_scalar("x", 1).add_scalar("x", 2), std::invalid_argument);
}

TEST_CASE("checkpoint: every truncation and every flipped byte is refused with one line naming the file") {
  const std::vector<uint8_t> good = sample().bytes();
  const std::string path = "/some/run.ckpt";
  REQUIRE_NOTHROW(CheckpointReader::parse(good, path));
  size_t accepted = 0, badly_worded = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    const std::span<const uint8_t> cut(good.data(), n);
    try {
      CheckpointReader::parse(cut, path);
      ++accepted;
    } catch (const DataError& e) {
      badly_worded += !one_line_naming(e.what(), path) || std::string(e.what()).find("truncated") == std::string::npos;
    }
  }
  CHECK(accepted == 0);
  CHECK(badly_worded == 0);
  for (size_t i = 0; i < good.size(); ++i)
    for (uint8_t mask : {0x01, 0x80}) {
      auto bad = good;
      bad[i] ^= mask;
      try {
        CheckpointReader::parse(bad, path);
        ++accepted;
      } catch (const DataError& e) {
        badly_worded += !one_line_naming(e.what(), path);
      }
    }
  CHECK(accepted == 0);
  CHECK(badly_worded == 0);
  auto longer = good;
  longer.push_back(0);
  const std::string message = data_error([&] { CheckpointReader::parse(longer, path); });
  CHECK(message ==
        path + ": corrupted checkpoint: 1 bytes after its end (header says " + std::to_string(good.size()) + " bytes)");
  auto flipped = good;
  flipped[40] ^= 4;
  CHECK(data_error([&] { CheckpointReader::parse(flipped, path); }) ==
        path + ": corrupted checkpoint: SHA-256 checksum mismatch");
  const std::vector<uint8_t> cut(good.begin(), good.end() - 5);
  CHECK(data_error([&] { CheckpointReader::parse(cut, path); }) ==
        path + ": truncated checkpoint: " + std::to_string(cut.size()) + " bytes, its header says " +
            std::to_string(good.size()));
}

TEST_CASE("checkpoint: a foreign file and an unknown version are refused") {
  const std::string path = "x.ckpt";
  const std::string text = "{\"json\": \"not a checkpoint at all, but long enough to have a header\"}";
  const std::vector<uint8_t> foreign(text.begin(), text.end());
  CHECK(data_error([&] { CheckpointReader::parse(foreign, path); }) == "x.ckpt: not an fplab checkpoint (bad magic)");
  // Version 2 with a correct checksum: refused for its version, not as corruption.
  auto future = sample().bytes();
  future[8] = 2;
  const fplab::util::Sha256Digest checksum = fplab::util::sha256(future.data(), future.size() - 32);
  std::copy(checksum.begin(), checksum.end(), future.end() - 32);
  CHECK(data_error([&] { CheckpointReader::parse(future, path); }) ==
        "x.ckpt: checkpoint version 2 is not supported (this build reads 1)");
}

TEST_CASE("checkpoint: a missing file is refused naming the path") {
  TempDir dir;
  const std::string absent = dir.file("absent.ckpt");
  CHECK(data_error([&] { CheckpointReader::read(absent); }) == absent + ": cannot open: No such file or directory");
}
