#include "profiles/hw_profile.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "profiles/shipped_hw_profiles.hpp"
#include "util/toml_text.hpp"
#include "util/whole_file.hpp"
#include "sim/schedule.hpp"

namespace fplab::profiles {

bool draws_noise(const OpChoice& choice) {
  return choice.schedule.nondeterministic() || choice.arithmetic.mode == fp::Mode::sr;
}

std::vector<OpKind> noisy_ops(const OpTable& table) {
  std::vector<OpKind> out;
  for (OpKind k : all_op_kinds)
    if (draws_noise(table[k])) out.push_back(k);
  return out;
}

std::vector<std::string> hw_profile_search_folders(const std::vector<std::string>& folders) {
  std::vector<std::string> out = folders;
  if (const char* env = std::getenv("FPLAB_HW_PROFILES"); env && *env) {
    std::string_view rest = env;
    for (;;) {
      const size_t colon = rest.find(':');
      if (const auto folder = rest.substr(0, colon); !folder.empty()) out.emplace_back(folder);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  return out;
}

namespace {

const char* const kArithmeticKeys[] = {"format", "mode", "products", "flush_subnormals", "saturate", "sr_bits"};

std::string op_names() {
  std::string s;
  for (OpKind k : all_op_kinds) s += (s.empty() ? "" : ", ") + std::string(op_kind_name(k));
  return s;
}

// Parsing with every error as "FILE:LINE: key 'SECTION.KEY': problem".
struct Reader {
  const std::string& path;

  [[noreturn]] void fail(const toml::node& node, const std::string& key, const std::string& problem) const {
    throw fp::FormatError(path + ":" + std::to_string(node.source().begin.line) + ": key '" + key + "': " + problem);
  }

  std::string string(const toml::node& node, const std::string& key) const {
    if (const auto* s = node.as_string()) return s->get();
    fail(node, key, "must be a string");
  }

  // Applies one arithmetic key (format, mode, products, flush_subnormals, saturate, sr_bits) to `a`.
  void arithmetic_key(sim::Arithmetic& a, const std::string& k, const toml::node& node, const std::string& key) const {
    try {
      if (k == "format") {
        const fp::Format f = fp::parse_format(string(node, key));
        // Training keeps every value in a float: the accumulation format must fit in one.
        if (f.exp_bits > 8 || f.man_bits > 23)
          fail(node, key,
               "format '" + f.name +
                   "' does not fit in a float (training stores fp32 values): use fp32, tf32, bf16, "
                   "fp16, e4m3, e5m2 or an eXmY with X <= 8, Y <= 23");
        a.format = f;
      } else if (k == "mode") {
        a.mode = fp::parse_mode(string(node, key));
      } else if (k == "products") {
        a.products = sim::parse_products(string(node, key));
      } else if (k == "sr_bits") {
        const auto* n = node.as_integer();
        if (!n || n->get() < 1 || n->get() > 64) fail(node, key, "must be a whole number 1..64");
        a.sr_bits = static_cast<int>(n->get());
      } else {
        const auto* b = node.as_boolean();
        if (!b) fail(node, key, "must be true or false");
        (k == "flush_subnormals" ? a.flush_subnormals : a.saturate) = b->get();
      }
    } catch (const fp::FormatError& e) {
      const std::string message = e.what();
      if (message.starts_with(path + ":")) throw;
      fail(node, key, message);
    }
  }

  static bool is_arithmetic_key(const std::string& k) {
    return std::find(std::begin(kArithmeticKeys), std::end(kArithmeticKeys), k) != std::end(kArithmeticKeys);
  }

  sim::Schedule schedule(const toml::node& node, const std::string& key) const {
    const std::string text = string(node, key);
    try {
      return sim::parse_schedule(text);
    } catch (const sim::ScheduleError& e) {
      fail(node, key, e.what());
    }
  }

  // One of [default] / [deterministic]: table-level arithmetic, then one entry per operation,
  // either a schedule string or { schedule = "...", format = "...", ... }.
  OpTable mode_table(const toml::table& t, const std::string& section) const {
    sim::Arithmetic shared;
    for (const auto& [key, node] : t) {
      const std::string k(key.str());
      if (is_arithmetic_key(k)) arithmetic_key(shared, k, node, section + "." + k);
    }
    OpTable table;
    std::array<bool, 7> seen{};
    for (const auto& [key, node] : t) {
      const std::string k(key.str()), full = section + "." + k;
      if (is_arithmetic_key(k)) continue;
      std::optional<OpKind> op;
      for (OpKind kind : all_op_kinds)
        if (k == op_kind_name(kind)) op = kind;
      if (!op)
        fail(node, full,
             "unknown key (known here: " + op_names() +
                 ", format, mode, products, flush_subnormals, saturate, sr_bits)");
      OpChoice choice{{}, shared};
      if (const auto* entry = node.as_table()) {
        bool has_schedule = false;
        for (const auto& [inner_key, inner] : *entry) {
          const std::string ik(inner_key.str()), inner_full = full + "." + ik;
          if (ik == "schedule") {
            choice.schedule = schedule(inner, inner_full);
            has_schedule = true;
          } else if (is_arithmetic_key(ik)) {
            arithmetic_key(choice.arithmetic, ik, inner, inner_full);
          } else {
            fail(inner, inner_full,
                 "unknown key (known here: schedule, format, mode, products, flush_subnormals, saturate, sr_bits)");
          }
        }
        if (!has_schedule) fail(node, full, "needs a schedule (e.g. { schedule = \"all:seq\", format = \"fp32\" })");
      } else if (node.is_string()) {
        choice.schedule = schedule(node, full);
      } else {
        fail(node, full, "must be a schedule string or a table { schedule = \"...\", format = \"...\", ... }");
      }
      table[*op] = choice;
      seen[static_cast<size_t>(*op)] = true;
    }
    for (OpKind kind : all_op_kinds)
      if (!seen[static_cast<size_t>(kind)])
        fail(t, section + "." + std::string(op_kind_name(kind)),
             "missing in [" + section + "] (every operation needs a schedule: " + op_names() + ")");
    return table;
  }
};

bool valid_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

HardwareProfile load_hw_profile(const std::string& path) { return parse_hw_profile(util::read_text_file(path), path); }

HardwareProfile parse_hw_profile(std::string_view text, const std::string& path) {
  const toml::table doc = util::parse_toml<fp::FormatError>(text, path);
  const Reader r{path};
  HardwareProfile p;
  p.path = path;
  for (const auto& [key, node] : doc) {
    const std::string k(key.str());
    if (k == "name") {
      p.name = r.string(node, k);
      if (!valid_name(p.name)) r.fail(node, k, "must be lower-case letters, digits, '-', '_' or '.'");
    } else if (k == "description") {
      p.description = r.string(node, k);
    } else if (k == "parallelism") {
      const auto* t = node.as_table();
      if (!t) r.fail(node, k, "must be a table [parallelism]");
      for (const auto& [pk, pv] : *t) {
        const auto* v = pv.as_integer();
        if (!v || v->get() < 1) r.fail(pv, "parallelism." + std::string(pk.str()), "must be a whole number >= 1");
        p.parallelism[std::string(pk.str())] = v->get();
      }
    } else if (k == "default" || k == "deterministic") {
      if (!node.as_table()) r.fail(node, k, "must be a table [" + k + "]");
      (k == "default" ? p.default_ops : p.deterministic_ops) = r.mode_table(*node.as_table(), k);
    } else {
      r.fail(node, k, "unknown key (known: name, description, parallelism, default, deterministic)");
    }
  }
  for (const std::string required : {"name", "description", "default", "deterministic"})
    if (!doc.contains(required)) {
      std::string message = path + ": missing key '" + required + "'";
      if (required == "default" || required == "deterministic")
        message += " (a table [" + required + "] with one schedule per operation)";
      throw fp::FormatError(message);
    }
  // The deterministic switch must remove every source of implementation noise.
  const auto& det = *doc["deterministic"].as_table();
  for (OpKind kind : all_op_kinds)
    if (draws_noise(p.deterministic_ops[kind])) {
      const std::string key = "deterministic." + std::string(op_kind_name(kind));
      const toml::node* node = det.get(op_kind_name(kind));
      std::string problem = sim::to_string(p.deterministic_ops[kind].schedule);
      problem += ' ';
      problem += p.deterministic_ops[kind].arithmetic.to_string();
      problem +=
          " draws from the implementation-noise stream (atomic, shuffle or stochastic rounding); the "
          "[deterministic] table must not";
      r.fail(*node, key, problem);
    }
  return p;
}

namespace {

std::string shipped_source(std::string_view name) {
  return "profiles/shipped/" + std::string(name) + ".toml (built in)";
}

}  // namespace

std::vector<std::string> hw_profile_names(const std::vector<std::string>& folders) {
  std::vector<std::string> names;
  for (const auto& folder : hw_profile_search_folders(folders)) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec))
      throw fp::FormatError(folder +
                            ": no such folder of hardware profiles (from --profiles-dir or $FPLAB_HW_PROFILES)");
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
      if (entry.is_regular_file(ec) && entry.path().extension() == ".toml")
        names.push_back(entry.path().stem().string());
  }
  for (const auto& shipped : shipped_hw_profiles()) names.emplace_back(shipped.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool is_hw_profile_path(const std::string& text) {
  std::error_code ec;
  return text.find('/') != std::string::npos || text.ends_with(".toml") || std::filesystem::is_regular_file(text, ec);
}

HardwareProfile find_hw_profile(const std::string& name_or_path, const std::vector<std::string>& folders) {
  if (is_hw_profile_path(name_or_path)) return load_hw_profile(name_or_path);
  auto checked = [&](HardwareProfile p) {
    if (p.name != name_or_path)
      throw fp::FormatError(p.path + ": key 'name' is '" + p.name + "', not '" + name_or_path +
                            "' as the file name says");
    return p;
  };
  for (const auto& folder : hw_profile_search_folders(folders)) {
    const auto path = (std::filesystem::path(folder) / (name_or_path + ".toml")).string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return checked(load_hw_profile(path));
  }
  for (const auto& shipped : shipped_hw_profiles())
    if (shipped.name == name_or_path) return checked(parse_hw_profile(shipped.text, shipped_source(shipped.name)));
  std::string known;
  for (const auto& n : hw_profile_names(folders)) known += (known.empty() ? "" : ", ") + n;
  throw fp::FormatError("unknown hardware profile '" + name_or_path + "' (known: " + known +
                        "; or a path to a .toml file)");
}

}  // namespace fplab::profiles
