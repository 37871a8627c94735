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
  for (OpKind k : all_op_kinds) {
    bool noisy = draws_noise(table[k]);
    for (const LayerRule& rule : table.layer_rules)
      if (const auto& chosen = rule.ops[static_cast<size_t>(k)]) noisy = noisy || draws_noise(*chosen);
    if (noisy) out.push_back(k);
  }
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

  // One operation's entry: a schedule string or { schedule = "...", format = "...", ... } over the
  // table-level arithmetic `shared`.
  OpChoice op_choice(const toml::node& node, const std::string& full, const sim::Arithmetic& shared) const {
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
    return choice;
  }

  static std::optional<OpKind> op_kind(const std::string& k) {
    for (OpKind kind : all_op_kinds)
      if (k == op_kind_name(kind)) return kind;
    return std::nullopt;
  }

  // match = { layer = "conv", in = 16, out = 32, kernel = 3, stride = 1, height = 14 }: every key but
  // layer optional.
  LayerMatch layer_match(const toml::node& node, const std::string& full) const {
    const auto* t = node.as_table();
    if (!t) fail(node, full, "must be a table { layer = \"conv\", kernel = 3, height = 14, ... }");
    LayerMatch match;
    bool has_layer = false;
    for (const auto& [key, value] : *t) {
      const std::string k(key.str()), key_full = full + "." + k;
      if (k == "layer") {
        const std::string kind = string(value, key_full);
        if (kind != "conv" && kind != "linear" && kind != "bn")
          fail(value, key_full, "must be \"conv\", \"linear\" or \"bn\"");
        match.kind = kind == "conv" ? LayerShape::Kind::conv
                     : kind == "bn" ? LayerShape::Kind::batch_norm
                                    : LayerShape::Kind::linear;
        has_layer = true;
        continue;
      }
      std::optional<size_t>* field = k == "in"       ? &match.in
                                     : k == "out"    ? &match.out
                                     : k == "kernel" ? &match.kernel
                                     : k == "stride" ? &match.stride
                                     : k == "height" ? &match.height
                                     : k == "batch"  ? &match.batch
                                                     : nullptr;
      if (!field) fail(value, key_full, "unknown key (known here: layer, in, out, kernel, stride, height, batch)");
      const auto* n = value.as_integer();
      if (!n || n->get() < 1) fail(value, key_full, "must be a whole number >= 1");
      *field = static_cast<size_t>(n->get());
    }
    if (!has_layer) fail(node, full, "needs layer = \"conv\", \"linear\" or \"bn\"");
    if (match.kind == LayerShape::Kind::linear && (match.kernel || match.stride || match.height))
      fail(node, full, "kernel, stride and height describe convolutions, not linear layers");
    if (match.kind == LayerShape::Kind::batch_norm && (match.out || match.kernel || match.stride))
      fail(node, full, "a batch norm is matched by in (its channels), height and batch only");
    return match;
  }

  // [[SECTION.layers]]: match = {...} and the operations whose choice differs in those layers.
  std::vector<LayerRule> layer_rules(const toml::node& node, const std::string& section,
                                     const sim::Arithmetic& shared) const {
    const std::string full = section + ".layers";
    const auto* rules = node.as_array();
    if (!rules) fail(node, full, "must be an array of tables [[" + full + "]]");
    std::vector<LayerRule> out;
    for (const toml::node& entry : *rules) {
      const auto* t = entry.as_table();
      if (!t) fail(entry, full, "must be an array of tables [[" + full + "]]");
      LayerRule rule;
      bool has_match = false, has_op = false;
      for (const auto& [key, value] : *t) {
        const std::string k(key.str()), key_full = full + "." + k;
        if (k == "match") {
          rule.match = layer_match(value, key_full);
          has_match = true;
        } else if (const auto op = op_kind(k); op && (*op == OpKind::fwd || *op == OpKind::dgrad ||
                                                      *op == OpKind::wgrad || *op == OpKind::bias_grad ||
                                                      *op == OpKind::bn_stats)) {
          rule.ops[static_cast<size_t>(*op)] = op_choice(value, key_full, shared);
          has_op = true;
        } else if (k == "conv_wgrad") {
          const std::string form = string(value, key_full);
          if (form != "gemm" && form != "winograd") fail(value, key_full, "must be \"gemm\" or \"winograd\"");
          rule.conv_wgrad = form == "winograd" ? ConvWgrad::winograd : ConvWgrad::gemm;
          has_op = true;
        } else if (k == "batch_norm") {
          const std::string form = string(value, key_full);
          if (form != "fplab" && form != "cudnn" && form != "cudnn-nchw" && form != "cudnn-nchw-backward")
            fail(value, key_full, "must be \"fplab\", \"cudnn\", \"cudnn-nchw\" or \"cudnn-nchw-backward\"");
          rule.batch_norm = form == "cudnn"                 ? BatchNormForm::cudnn
                            : form == "cudnn-nchw"          ? BatchNormForm::cudnn_nchw
                            : form == "cudnn-nchw-backward" ? BatchNormForm::cudnn_nchw_backward
                                                            : BatchNormForm::fplab;
          has_op = true;
        } else {
          fail(value, key_full,
               "unknown key (known here: match, fwd, dgrad, wgrad, bias_grad, bn_stats, conv_wgrad, batch_norm)");
        }
      }
      if (!has_match) fail(entry, full, "needs match = { layer = \"conv\", ... }");
      if (!has_op) fail(entry, full, "sets no operation (fwd, dgrad, wgrad, bias_grad, bn_stats, conv_wgrad or batch_norm)");
      // A batch norm has its statistics and the sums of its backward pass (bias_grad), nothing else;
      // bn_stats and batch_norm belong to batch norms only.
      const bool bn = rule.match.kind == LayerShape::Kind::batch_norm;
      for (const OpKind kind : {OpKind::fwd, OpKind::dgrad, OpKind::wgrad})
        if (bn && rule.ops[static_cast<size_t>(kind)])
          fail(entry, full + "." + std::string(op_kind_name(kind)), "a batch norm rule sets bn_stats, bias_grad and batch_norm only");
      if (!bn && (rule.ops[static_cast<size_t>(OpKind::bn_stats)] || rule.batch_norm))
        fail(entry, full, "bn_stats and batch_norm need match = { layer = \"bn\", ... }");
      if (bn && rule.conv_wgrad)
        fail(entry, full + ".conv_wgrad", "describes convolutions: it needs match = { layer = \"conv\", ... }");
      // F(4x4, 3x3) takes 3x3 stride-1 convolutions only: the rule must not reach another shape.
      if (rule.conv_wgrad == ConvWgrad::winograd &&
          (rule.match.kind != LayerShape::Kind::conv || rule.match.kernel != 3u || rule.match.stride != 1u))
        fail(entry, full + ".conv_wgrad",
             "\"winograd\" needs match = { layer = \"conv\", kernel = 3, stride = 1, ... } (F(4x4, 3x3) only)");
      out.push_back(std::move(rule));
    }
    return out;
  }

  // One of [default] / [deterministic]: table-level arithmetic, then one entry per operation,
  // then any [[SECTION.layers]] rules.
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
      if (k == "layers") {
        table.layer_rules = layer_rules(node, section, shared);
        continue;
      }
      if (k == "conv_dgrad") {
        const std::string form = string(node, full);
        if (form != "col2im" && form != "direct") fail(node, full, "must be \"col2im\" or \"direct\"");
        table.conv_dgrad = form == "direct" ? ConvDgrad::direct : ConvDgrad::col2im;
        continue;
      }
      const std::optional<OpKind> op = op_kind(k);
      if (!op)
        fail(node, full,
             "unknown key (known here: " + op_names() +
                 ", layers, conv_dgrad, format, mode, products, flush_subnormals, saturate, sr_bits)");
      table[*op] = op_choice(node, full, shared);
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
  // The deterministic switch must remove every source of implementation noise, layer rules included.
  const auto& det = *doc["deterministic"].as_table();
  const auto noisy = [&r](const OpChoice& choice, const toml::node& node, const std::string& key) {
    if (!draws_noise(choice)) return;
    r.fail(node, key,
           sim::to_string(choice.schedule) + " " + choice.arithmetic.to_string() +
               " draws from the implementation-noise stream (atomic, shuffle or stochastic rounding); the "
               "[deterministic] table must not");
  };
  for (OpKind kind : all_op_kinds)
    noisy(p.deterministic_ops[kind], *det.get(op_kind_name(kind)), "deterministic." + std::string(op_kind_name(kind)));
  for (size_t i = 0; i < p.deterministic_ops.layer_rules.size(); ++i)
    for (OpKind kind : all_op_kinds)
      if (const auto& chosen = p.deterministic_ops.layer_rules[i].ops[static_cast<size_t>(kind)])
        noisy(*chosen, *det["layers"][i][op_kind_name(kind)].node(),
              "deterministic.layers." + std::string(op_kind_name(kind)));
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
