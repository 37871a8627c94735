#include "profiles/op_table.hpp"

#include <toml++/toml.h>

#include <map>

#include "fp/format.hpp"
#include "sim/presets.hpp"

namespace fplab::profiles {

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::fwd:
      return "fwd";
    case OpKind::dgrad:
      return "dgrad";
    case OpKind::wgrad:
      return "wgrad";
    case OpKind::bias_grad:
      return "bias_grad";
    case OpKind::bn_stats:
      return "bn_stats";
    case OpKind::softmax:
      return "softmax";
    case OpKind::loss:
      return "loss";
  }
  return "?";
}

const OpChoice& OpTable::choice(OpKind kind, const LayerShape* layer) const {
  if (layer)
    for (const LayerRule& rule : layer_rules)
      if (const auto& chosen = rule.ops[static_cast<size_t>(kind)]; chosen && rule.match.matches(*layer))
        return *chosen;
  return (*this)[kind];
}

ConvWgrad OpTable::conv_wgrad(const LayerShape& layer) const {
  for (const LayerRule& rule : layer_rules)
    if (rule.conv_wgrad && rule.match.matches(layer)) return *rule.conv_wgrad;
  return ConvWgrad::gemm;
}

BatchNormForm OpTable::batch_norm(const LayerShape& layer) const {
  for (const LayerRule& rule : layer_rules)
    if (rule.batch_norm && rule.match.matches(layer)) return *rule.batch_norm;
  return BatchNormForm::fplab;
}

std::vector<const OpChoice*> OpTable::every_choice() const {
  std::vector<const OpChoice*> out;
  for (const auto& op : ops) out.push_back(&op);
  for (const LayerRule& rule : layer_rules)
    for (const auto& op : rule.ops)
      if (op) out.push_back(&*op);
  return out;
}

void OpTable::set_format(const fp::Format& format) {
  for (auto& op : ops) op.arithmetic.format = format;
  for (LayerRule& rule : layer_rules)
    for (auto& op : rule.ops)
      if (op) op->arithmetic.format = format;
}

bool OpTable::nondeterministic() const {
  for (const OpChoice* op : every_choice())
    if (op->schedule.nondeterministic()) return true;
  return false;
}

namespace {

std::string describe_choice(OpKind kind, const OpChoice& choice) {
  return std::string(op_kind_name(kind)) + "=" + sim::to_string(choice.schedule) + " " + choice.arithmetic.to_string();
}

}  // namespace

std::string describe_rule(const LayerRule& rule) {
  std::string s = rule.match.describe() + ":";
  for (OpKind k : all_op_kinds)
    if (const auto& chosen = rule.ops[static_cast<size_t>(k)]) s += " " + describe_choice(k, *chosen);
  if (rule.conv_wgrad) s += " conv_wgrad=" + std::string(conv_wgrad_name(*rule.conv_wgrad));
  if (rule.batch_norm) s += " batch_norm=" + std::string(batch_norm_form_name(*rule.batch_norm));
  return s;
}

std::string_view conv_dgrad_name(ConvDgrad form) { return form == ConvDgrad::direct ? "direct" : "col2im"; }

std::string OpTable::describe() const {
  std::string s;
  for (OpKind k : all_op_kinds) s += (s.empty() ? "" : "; ") + describe_choice(k, (*this)[k]);
  for (const LayerRule& rule : layer_rules) s += "; layers " + describe_rule(rule);
  if (conv_dgrad != ConvDgrad::col2im) s += "; conv_dgrad=" + std::string(conv_dgrad_name(conv_dgrad));
  return s;
}

namespace {

sim::Arithmetic arithmetic_for(std::string_view format) {
  sim::Arithmetic a;
  a.format = fp::parse_format(format);
  return a;
}

const std::map<std::string, std::array<const char*, 7>, std::less<>>& preset_schedules() {
  // Order: fwd, dgrad, wgrad, bias_grad, bn_stats, softmax, loss.
  static const std::map<std::string, std::array<const char*, 7>, std::less<>> presets = {
      {"seq", {"all:seq", "all:seq", "all:seq", "all:seq", "all:seq", "all:seq", "all:seq"}},
      {"pairwise", {"all:tree", "all:tree", "all:tree", "all:tree", "all:tree", "all:tree", "all:tree"}},
      {"gpu",
       {"all:seq", "split(4):seq | all:seq", "split(8):seq | all:atomic",
        "contig(8):seq | contig(32):shfl_down | all:atomic", "strided(256):seq | contig(32):shfl_down | all:seq",
        "all:shfl_down", "strided(32):seq | all:shfl_down"}},
      {"atomic",
       {"split(4):seq | all:atomic", "split(4):seq | all:atomic", "split(4):seq | all:atomic",
        "split(4):seq | all:atomic", "split(4):seq | all:atomic", "split(4):seq | all:atomic",
        "split(4):seq | all:atomic"}},
      {"exact", {"all:exact", "all:exact", "all:exact", "all:exact", "all:exact", "all:exact", "all:exact"}},
  };
  return presets;
}

}  // namespace

std::string op_table_presets_help() { return "seq, pairwise, gpu, atomic, exact"; }

OpTable op_table_preset(std::string_view preset, std::string_view format) {
  if (format == "exact") preset = "exact", format = "fp32";
  const auto it = preset_schedules().find(preset);
  if (it == preset_schedules().end())
    throw fp::FormatError("unknown schedule preset '" + std::string(preset) + "' (known: " + op_table_presets_help() +
                          ", or a TOML file)");
  OpTable table;
  for (size_t i = 0; i < 7; ++i) table.ops[i] = {sim::parse_schedule(it->second[i]), arithmetic_for(format)};
  return table;
}

OpTable load_op_table(const std::string& path, std::string_view format) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw fp::FormatError(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  auto where = [&](const toml::node& node) { return path + ":" + std::to_string(node.source().begin.line); };
  sim::Arithmetic arithmetic = arithmetic_for(format.empty() ? "fp32" : format);
  OpTable table;
  std::array<bool, 7> seen{};
  for (const auto& [key, node] : doc) {
    const std::string k(key.str());
    const auto* text = node.as_string();
    if (!text) throw fp::FormatError(where(node) + ": key '" + k + "' must be a string");
    try {
      if (k == "format") {
        if (format.empty()) arithmetic.format = fp::parse_format(text->get());
        continue;
      }
      if (k == "mode") {
        arithmetic.mode = fp::parse_mode(text->get());
        continue;
      }
      if (k == "products") {
        arithmetic.products = sim::parse_products(text->get());
        continue;
      }
      bool known = false;
      for (OpKind op : all_op_kinds)
        if (k == op_kind_name(op)) {
          table[op].schedule = sim::parse_schedule(text->get());
          seen[static_cast<size_t>(op)] = known = true;
        }
      if (!known)
        throw fp::FormatError(
            "unknown key '" + k +
            "' (known: fwd, dgrad, wgrad, bias_grad, bn_stats, softmax, loss, format, mode, products)");
    } catch (const sim::ScheduleError& e) {
      throw fp::FormatError(where(node) + ": key '" + k + "': " + e.what());
    } catch (const fp::FormatError& e) {
      const std::string message = e.what();
      if (message.starts_with(path)) throw;
      throw fp::FormatError(where(node) + ": " + message);
    }
  }
  for (OpKind op : all_op_kinds)
    if (!seen[static_cast<size_t>(op)])
      throw fp::FormatError(path + ": missing key '" + std::string(op_kind_name(op)) +
                            "' (every operation needs a schedule)");
  for (auto& op : table.ops) op.arithmetic = arithmetic;
  return table;
}

}  // namespace fplab::profiles
