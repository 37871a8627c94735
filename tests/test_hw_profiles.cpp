// Hardware profiles (profiles/shipped/*.toml, docs/profiles.md): every shipped profile loads under its
// file's name; every [deterministic] table draws no implementation noise; exact and tpu-v3 draw
// none in either mode, the GPUs do by default (the research's premise); the schedules use the
// chips' SM counts; malformed profiles fail with one line naming the file, the line and the key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "fp/format.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/presets.hpp"
#include "sim/schedule.hpp"
#include "sim/tensor_core.hpp"
#include "sim/tensor_core_models.hpp"
#include "tests/temp_dir.hpp"

using namespace fplab;
using namespace fplab::profiles;
using fplab::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kRequired = {"cpu-seq",   "numpy",      "p100",      "v100",       "t4",
                                            "rtx5000",   "rtx5000-tc", "a100-tf32", "h100",       "h100-tf32",
                                            "h100-bf16", "tpu-v3",     "exact",     "det-atomics"};
// Real GPUs in their framework's default mode: atomics somewhere (Zhuang et al.'s IMPL noise).
const std::vector<std::string> kNoisyByDefault = {"p100",      "v100", "t4",        "rtx5000",  "rtx5000-tc",
                                                  "a100-tf32", "h100", "h100-tf32", "h100-bf16"};
// Machines with nothing nondeterministic to switch off.
const std::vector<std::string> kDeterministicHardware = {"cpu-seq", "numpy", "tpu-v3", "exact", "det-atomics"};

std::string names_of(const std::vector<OpKind>& ops) {
  std::string s;
  for (auto k : ops) s += std::string(op_kind_name(k)) + " ";
  return s;
}

// A valid profile whose pieces the malformed cases replace.
std::string table(const std::string& mode, const std::string& extra = "", const std::string& skip = "") {
  std::string s = "[" + mode + "]\nformat = \"fp32\"\n" + extra;
  for (OpKind k : all_op_kinds)
    if (op_kind_name(k) != skip) s += std::string(op_kind_name(k)) + " = \"all:seq\"\n";
  return s;
}
std::string profile_text(const std::string& default_table, const std::string& deterministic_table,
                         const std::string& head = "") {
  return "name = \"toy\"\ndescription = \"a toy\"\n" + head + "[parallelism]\nsms = 4\n" + default_table +
         deterministic_table;
}

}  // namespace

TEST_CASE("hw profiles: every shipped profile loads, under its file's name, with all seven operations") {
  const auto names = hw_profile_names();
  for (const auto& required : kRequired) {
    INFO(required);
    CHECK(std::find(names.begin(), names.end(), required) != names.end());
  }
  for (const auto& name : names) {
    INFO(name);
    const HardwareProfile p = find_hw_profile(name);
    CHECK(p.name == name);
    CHECK(fs::path(p.path).stem() == name);
    CHECK(!p.description.empty());
    CHECK(p.description.find('\n') == std::string::npos);
    CHECK(!p.parallelism.empty());
    for (const OpTable* t : {&p.default_ops, &p.deterministic_ops})
      for (OpKind k : all_op_kinds) {
        // Training keeps fp32 values: every accumulation format must fit in a float.
        CHECK((*t)[k].arithmetic.format.exp_bits <= 8);
        CHECK((*t)[k].arithmetic.format.man_bits <= 23);
        CHECK(!(*t)[k].schedule.stages.empty());
      }
  }
}

TEST_CASE("hw profiles: every [deterministic] table draws no implementation noise") {
  for (const auto& name : hw_profile_names()) {
    const HardwareProfile p = find_hw_profile(name);
    INFO(name << ": deterministic mode's noisy ops: " << names_of(noisy_ops(p.deterministic_ops)));
    CHECK(noisy_ops(p.deterministic_ops).empty());
    CHECK(!p.deterministic_ops.nondeterministic());
  }
}

TEST_CASE("hw profiles: exact, tpu-v3 and the other deterministic machines draw no noise in either mode") {
  for (const auto& name : kDeterministicHardware) {
    const HardwareProfile p = find_hw_profile(name);
    INFO(name << ": default mode's noisy ops: " << names_of(noisy_ops(p.default_ops)));
    CHECK(noisy_ops(p.default_ops).empty());
    CHECK(noisy_ops(p.deterministic_ops).empty());
  }
  // exact: the order cannot matter anywhere.
  const HardwareProfile exact = find_hw_profile("exact");
  for (const OpTable* t : {&exact.default_ops, &exact.deterministic_ops})
    for (OpKind k : all_op_kinds) CHECK((*t)[k].schedule.order_independent());
  // tpu-v3: 128-deep systolic GEMMs, products formed then accumulated in fp32.
  const HardwareProfile tpu = find_hw_profile("tpu-v3");
  for (OpKind k : {OpKind::fwd, OpKind::dgrad, OpKind::wgrad}) {
    CHECK(sim::to_string(tpu.default_ops[k].schedule) == "contig(128):seq | all:seq");
    CHECK(tpu.default_ops[k].arithmetic.format == fp::fp32());
    CHECK(tpu.default_ops[k].arithmetic.products == sim::Products::rounded);
  }
}

TEST_CASE("hw profiles: the GPUs' default modes draw implementation noise (the paper's premise)") {
  for (const auto& name : kNoisyByDefault) {
    const HardwareProfile p = find_hw_profile(name);
    INFO(name);
    CHECK(!noisy_ops(p.default_ops).empty());
    CHECK(p.default_ops.nondeterministic());
    // Every GPU's bias gradient is TF's atomic kernel in default mode, a column reduction when
    // determinism is asked for.
    CHECK(draws_noise(p.default_ops[OpKind::bias_grad]));
  }
}

TEST_CASE("hw profiles: GPU parallelism follows the chips' SM counts and the schedules use it") {
  const std::pair<const char*, int64_t> sms[] = {{"p100", 56},    {"v100", 80},       {"t4", 40},
                                                 {"rtx5000", 48}, {"rtx5000-tc", 48}, {"a100-tf32", 108},
                                                 {"h100", 132},   {"h100-tf32", 132}, {"h100-bf16", 132}};
  for (const auto& [name, count] : sms) {
    INFO(name);
    const HardwareProfile p = find_hw_profile(name);
    REQUIRE(p.parallelism.count("sms"));
    CHECK(p.parallelism.at("sms") == count);
    CHECK(p.parallelism.at("warp_size") == 32);
    // TF's BiasGrad grid: at most one block per SM.
    const auto& bias = p.default_ops[OpKind::bias_grad].schedule;
    CHECK(bias.stages.front().grouping.kind == sim::Grouping::Kind::strided);
    CHECK(bias.stages.front().grouping.size == count);
    // BatchNorm statistics: a grid of sms * max_threads_per_sm / 256 blocks of 256 threads.
    const int64_t blocks = count * p.parallelism.at("max_threads_per_sm") / 256;
    CHECK(p.parallelism.at("reduction_blocks") == blocks);
    CHECK(sim::to_string(p.default_ops[OpKind::bn_stats].schedule) ==
          sim::to_string(sim::parse_schedule("cub-sum(256," + std::to_string(blocks) + ")")));
  }
  // Pre-Ampere weight gradients: one atomically combined partial per SM.
  CHECK(sim::to_string(find_hw_profile("v100").default_ops[OpKind::wgrad].schedule) == "split(80):seq | all:atomic");
  CHECK(sim::to_string(find_hw_profile("p100").default_ops[OpKind::dgrad].schedule) == "split(56):seq | all:atomic");
  // Tensor cores: the fused multi-term models of docs/tensor-cores.md.
  CHECK(sim::to_string(find_hw_profile("h100-tf32").default_ops[OpKind::fwd].schedule) == "all:fused(8,25,tf32)");
  CHECK(sim::to_string(find_hw_profile("h100-bf16").default_ops[OpKind::fwd].schedule) == "all:fused(16,25,bf16)");
  CHECK(sim::to_string(find_hw_profile("a100-tf32").default_ops[OpKind::fwd].schedule) == "all:fused(4,24,tf32)");
  CHECK(sim::to_string(find_hw_profile("rtx5000-tc").default_ops[OpKind::fwd].schedule) ==
        "all:fused(4,23)");  // fp16 unconverted: no loss scaling
}

TEST_CASE("hw profiles: det-atomics is v100 with every atomic step made a fixed-order fold") {
  const HardwareProfile v100 = find_hw_profile("v100"), dab = find_hw_profile("det-atomics");
  for (OpKind k : all_op_kinds) {
    INFO(op_kind_name(k));
    sim::Schedule fixed = v100.default_ops[k].schedule;
    for (auto& stage : fixed.stages)
      if (stage.reducer.kind == sim::Reducer::Kind::atomic) stage.reducer.kind = sim::Reducer::Kind::seq;
    CHECK(dab.default_ops[k].schedule == fixed);
    CHECK(dab.deterministic_ops[k].schedule == v100.deterministic_ops[k].schedule);
  }
}

TEST_CASE("hw profiles: per-operation arithmetic, presets and the folder lookup") {
  TempDir dir;
  const std::string text =
      profile_text(table("default", "mode = \"rz\"\n", "fwd") +
                       "fwd = { schedule = \"tc-a100\", format = \"bf16\", products = \"exact\" }\n",
                   table("deterministic"));
  const std::string path = dir.write("toy.toml", text);
  const HardwareProfile p = load_hw_profile(path);
  CHECK(p.name == "toy");
  CHECK(p.parallelism.at("sms") == 4);
  CHECK(sim::to_string(p.default_ops[OpKind::fwd].schedule) == "all:fused(8,24,fp16)");  // preset, printed canonical
  CHECK(p.default_ops[OpKind::fwd].arithmetic.format == fp::bf16());
  CHECK(p.default_ops[OpKind::fwd].arithmetic.mode == fp::Mode::rz);  // table-level, not overridden
  CHECK(p.default_ops[OpKind::fwd].arithmetic.products == sim::Products::exact);
  CHECK(p.default_ops[OpKind::dgrad].arithmetic.to_string() == "fp32/rz/fused");
  CHECK(p.deterministic_ops[OpKind::dgrad].arithmetic.to_string() == "fp32/rne/fused");
  // Stochastic rounding with the few random bits of a hardware SR unit.
  const HardwareProfile few_bits = load_hw_profile(
      dir.write("few.toml", profile_text(table("default", "mode = \"sr\"\nsr_bits = 8\n"), table("deterministic"))));
  CHECK(few_bits.default_ops[OpKind::fwd].arithmetic.sr_bits == 8);
  CHECK(few_bits.default_ops[OpKind::fwd].arithmetic.to_string() == "fp32/sr/fused/sr_bits=8");
  CHECK(few_bits.deterministic_ops[OpKind::fwd].arithmetic.sr_bits == 64);

  const std::vector<std::string> folders = {dir.path.string()};
  const auto names = hw_profile_names(folders);  // the user's folder and every shipped profile
  CHECK(std::count(names.begin(), names.end(), "toy") == 1);
  CHECK(std::count(names.begin(), names.end(), "h100") == 1);
  CHECK(find_hw_profile("toy", folders).path == path);
  CHECK(find_hw_profile(path).name == "toy");  // a path works anywhere
  CHECK_THROWS_WITH(find_hw_profile("nope", folders), Catch::Contains("unknown hardware profile 'nope'") &&
                                                          Catch::Contains("toy") && Catch::Contains("h100"));
  dir.write("other.toml", text);  // says name = "toy"
  CHECK_THROWS_WITH(find_hw_profile("other", folders), Catch::Contains("key 'name' is 'toy', not 'other'"));

  // $FPLAB_HW_PROFILES adds folders after the caller's and before the shipped profiles.
  const char* old = std::getenv("FPLAB_HW_PROFILES");
  const std::string saved = old ? old : "";
  ::setenv("FPLAB_HW_PROFILES", ("/nonexistent-a:" + dir.path.string()).c_str(), 1);
  CHECK(hw_profile_search_folders({"x"}) == std::vector<std::string>{"x", "/nonexistent-a", dir.path.string()});
  ::setenv("FPLAB_HW_PROFILES", dir.path.string().c_str(), 1);
  CHECK(find_hw_profile("toy").path == path);
  if (old)
    ::setenv("FPLAB_HW_PROFILES", saved.c_str(), 1);
  else
    ::unsetenv("FPLAB_HW_PROFILES");
}

TEST_CASE("hw profiles: the shipped profiles are built in, and a user's folder overrides one by name") {
  // Built in: found with no folder on the search path, from the program's own bytes.
  const char* old = std::getenv("FPLAB_HW_PROFILES");
  const std::string saved = old ? old : "";
  ::unsetenv("FPLAB_HW_PROFILES");
  const HardwareProfile shipped = find_hw_profile("h100");
  CHECK(shipped.path == "profiles/shipped/h100.toml (built in)");
  // ... and equal to the file in the source tree they were built from.
  const HardwareProfile from_file = load_hw_profile(std::string(FPLAB_SOURCE_DIR) + "/profiles/shipped/h100.toml");
  CHECK(shipped.default_ops.describe() == from_file.default_ops.describe());
  CHECK(shipped.deterministic_ops.describe() == from_file.deterministic_ops.describe());

  TempDir dir;
  std::string text = profile_text(table("default"), table("deterministic"));
  const auto at = text.find("name = \"toy\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 12, "name = \"h100\"");
  const std::string mine = dir.write("h100.toml", text);
  CHECK(find_hw_profile("h100", {dir.path.string()}).path == mine);
  CHECK(find_hw_profile("h100").path == shipped.path);
  if (old) ::setenv("FPLAB_HW_PROFILES", saved.c_str(), 1);
}

TEST_CASE("hw profiles: malformed profiles give one line naming the file, the line and the key") {
  TempDir dir;
  struct Case {
    const char* what;
    std::string text;
    std::string expect;  // after "FILE"
  };
  const std::string ok_default = table("default"), ok_det = table("deterministic");
  // Line numbers: name 1, description 2, [parallelism] 3, sms 4, [default] 5, format 6, ops 7..13,
  // [deterministic] 14, format 15, ops 16..22 (extra lines shift the later ones).
  const Case cases[] = {
      {"unknown top-level key", profile_text(ok_default, ok_det, "colour = \"red\"\n"),
       ":3: key 'colour': unknown key (known: name, description, parallelism, default, deterministic)"},
      {"unknown operation", profile_text(table("default", "fwdd = \"all:seq\"\n"), ok_det),
       ":7: key 'default.fwdd': unknown key (known here: fwd, dgrad"},
      {"unknown key in an operation's table",
       profile_text(table("default", "", "fwd") + "fwd = { schedule = \"all:seq\", fromat = \"fp32\" }\n", ok_det),
       ":13: key 'default.fwd.fromat': unknown key"},
      {"bad schedule, with its position",
       profile_text(table("default", "", "wgrad") + "wgrad = \"split(8):seq | all:atomc\"\n", ok_det),
       ":13: key 'default.wgrad': schedule 'split(8):seq | all:atomc': unknown reducer 'atomc'"},
      {"missing operation", profile_text(ok_default, table("deterministic", "", "loss")),
       ":14: key 'deterministic.loss': missing in [deterministic]"},
      {"schedule of the wrong type", profile_text(table("default", "", "fwd") + "fwd = 3\n", ok_det),
       ":13: key 'default.fwd': must be a schedule string or a table"},
      {"parallelism of the wrong type",
       "name = \"toy\"\ndescription = \"x\"\n[parallelism]\nsms = \"many\"\n" + ok_default + ok_det,
       ":4: key 'parallelism.sms': must be a whole number >= 1"},
      {"format of the wrong type", profile_text(table("default", "mode = 32\n"), ok_det),
       ":7: key 'default.mode': must be a string"},
      {"boolean of the wrong type", profile_text(table("default", "flush_subnormals = \"yes\"\n"), ok_det),
       ":7: key 'default.flush_subnormals': must be true or false"},
      {"sr_bits out of range", profile_text(table("default", "sr_bits = 0\n"), ok_det),
       ":7: key 'default.sr_bits': must be a whole number 1..64"},
      {"unknown format",
       profile_text(table("default", "", "fwd") + "fwd = { schedule = \"seq\", format = \"fp33\" }\n", ok_det),
       ":13: key 'default.fwd.format': unknown format 'fp33'"},
      {"format that does not fit in a float",
       profile_text(table("default", "", "fwd") + "fwd = { schedule = \"seq\", format = \"fp64\" }\n", ok_det),
       ":13: key 'default.fwd.format': format 'fp64' does not fit in a float"},
      {"operation table without a schedule",
       profile_text(table("default", "", "fwd") + "fwd = { format = \"fp32\" }\n", ok_det),
       ":13: key 'default.fwd': needs a schedule"},
      {"atomics in [deterministic]",
       profile_text(ok_default, table("deterministic", "", "wgrad") + "wgrad = \"splitk-atomic(4)\"\n"),
       ":22: key 'deterministic.wgrad': split(4):seq | all:atomic fp32/rne/fused draws from the implementation-noise "
       "stream"},
      {"stochastic rounding in [deterministic]", profile_text(ok_default, table("deterministic", "mode = \"sr\"\n")),
       ":17: key 'deterministic.fwd': all:seq fp32/sr/fused draws from the implementation-noise stream"},
      {"name of the wrong type", "name = 7\n" + ok_default + ok_det, ":1: key 'name': must be a string"},
      {"bad name", profile_text(ok_default, ok_det).replace(0, 12, "name = \"A B\""),
       ":1: key 'name': must be lower-case"},
      {"missing table", "name = \"toy\"\ndescription = \"x\"\n" + ok_default, ": missing key 'deterministic'"},
      {"broken TOML", "name = \"toy\"\ndescription = \"x\"\n[default\nfwd = \"all:seq\"\n", ":3: "},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("bad" + std::to_string(i++) + ".toml", c.text);
    INFO(c.what << "\n" << c.text);
    try {
      load_hw_profile(path);
      FAIL("no error");
    } catch (const fp::FormatError& e) {
      const std::string message = e.what();
      INFO(message);
      CHECK(message.starts_with(path));
      CHECK(message.find(c.expect) != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  CHECK_THROWS_WITH(load_hw_profile((dir.path / "absent.toml").string()), Catch::Contains("absent.toml: cannot open"));
}

TEST_CASE("hw profiles: presets, named models and every shipped profile agree with the tensor-core registry") {
  std::set<std::string> preset_names;
  for (const auto& p : sim::presets()) preset_names.insert(p.name);
  for (const auto& m : sim::tensor_core_models()) {
    INFO(m.name);
    // The preset of the same name is exactly the model's fused reducer over the whole group.
    REQUIRE(preset_names.count(std::string(m.name)) == 1);
    const sim::Schedule preset = sim::parse_schedule(m.name);
    REQUIRE(preset.stages.size() == 1);
    CHECK(preset.stages[0].grouping.kind == sim::Grouping::Kind::all);
    CHECK(preset.stages[0].reducer == sim::fused_reducer(m));
    // fused(MODEL) in the grammar names the same reducer.
    CHECK(sim::parse_schedule("split(4):fused(" + std::string(m.name) + ") | all:seq").stages[0].reducer ==
          sim::fused_reducer(m));
    // The spec the MMA validation and the probes use holds the same N, F and input.
    const sim::FusedAddSpec spec = sim::tensor_core_model(m.name);
    CHECK(spec.products == m.products);
    CHECK(spec.fraction_bits == m.fraction_bits);
    CHECK(std::pair{spec.input, spec.input_mode} == sim::fused_input_conversion(m.input));
  }
  // Every tc-* preset comes from the registry (none written by hand beside it).
  for (const auto& name : preset_names)
    if (name.rfind("tc-", 0) == 0) CHECK(sim::find_tensor_core_model(name) != nullptr);
  // Every fused step of every shipped profile is a model of the registry, and the files name it
  // (the numbers are written once, in the registry).
  for (const auto& name : hw_profile_names()) {
    const HardwareProfile p = find_hw_profile(name);
    for (const OpTable* table : {&p.default_ops, &p.deterministic_ops})
      for (OpKind k : all_op_kinds)
        for (const auto& stage : (*table)[k].schedule.stages) {
          if (stage.shuffle || stage.reducer.kind != sim::Reducer::Kind::fused) continue;
          INFO(name << " " << op_kind_name(k) << ": " << sim::to_string(stage.reducer));
          bool known = false;
          for (const auto& m : sim::tensor_core_models()) known = known || stage.reducer == sim::fused_reducer(m);
          CHECK(known);
        }
    std::ifstream in(std::string(FPLAB_SOURCE_DIR) + "/profiles/shipped/" + name + ".toml");
    for (std::string line; std::getline(in, line);) {
      const auto code = line.substr(0, line.find('#'));
      INFO(name << ": " << line);
      CHECK_FALSE(std::regex_search(code, std::regex(R"(fused\(\s*[0-9])")));
    }
  }
}
