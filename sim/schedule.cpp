#include "sim/schedule.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <utility>

#include "sim/presets.hpp"
#include "sim/tensor_core_models.hpp"

namespace fplab::sim {
namespace {

using RK = Reducer::Kind;
constexpr int64_t kMaxPermLanes = 65536;
constexpr std::array<std::pair<Reducer::Input, std::string_view>, 13> kFusedInputs = {
    {{Reducer::Input::none, "none"},
     {Reducer::Input::tf32, "tf32"},
     {Reducer::Input::bf16, "bf16"},
     {Reducer::Input::fp16, "fp16"},
     {Reducer::Input::e4m3, "e4m3"},
     {Reducer::Input::e5m2, "e5m2"},
     {Reducer::Input::tf32rne, "tf32rne"},
     {Reducer::Input::tf32rna, "tf32rna"},
     {Reducer::Input::mxe4m3, "mxe4m3"},
     {Reducer::Input::mxe5m2, "mxe5m2"},
     {Reducer::Input::mxe3m2, "mxe3m2"},
     {Reducer::Input::mxe2m3, "mxe2m3"},
     {Reducer::Input::mxe2m1, "mxe2m1"}}};

// "tf32, bf16, ...": every input a fused step converts to, for error messages.
std::string fused_input_names() {
  std::string names;
  for (const auto& [kind, name] : kFusedInputs)
    if (kind != Reducer::Input::none) names.append(names.empty() ? "" : ", ").append(name);
  return names;
}

constexpr std::array<std::pair<RK, std::string_view>, 13> kPlainReducers = {{
    {RK::seq, "seq"},
    {RK::rev, "rev"},
    {RK::tree, "tree"},
    {RK::shfl_down, "shfl_down"},
    {RK::shfl_up, "shfl_up"},
    {RK::shfl_xor, "shfl_xor"},
    {RK::atomic, "atomic"},
    {RK::ring, "ring"},
    {RK::kahan, "kahan"},
    {RK::neumaier, "neumaier"},
    {RK::exact, "exact"},
    {RK::binned, "binned"},
    {RK::numpy_pairwise, "numpy_pairwise"},
}};

// Reducers made of single additions, whose partials a stage can hold in a format of their own.
bool holds_single_additions(RK kind) {
  return kind != RK::kahan && kind != RK::neumaier && kind != RK::exact && kind != RK::binned && kind != RK::fused;
}

// Recursive-descent reader over the text, tracking positions for error messages.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  Schedule schedule() {
    Schedule s;
    skip_spaces();
    if (done()) fail("empty schedule");
    s.stages = pipeline();
    if (!done())
      fail(text_[pos_] == ']' ? "']' closes no body(M)[, each(S)[ or deal(P,B)[" : "expected '|' between stages");
    return s;
  }

 private:
  // Stages separated by '|', up to the end of the text or a ']' (left for the caller).
  std::vector<Stage> pipeline() {
    std::vector<Stage> stages{stage()};
    while (take('|')) stages.push_back(stage());
    skip_spaces();
    return stages;
  }

  Stage stage() {
    skip_spaces();
    const size_t start = pos_;
    const std::string_view word = identifier();
    Stage st;
    if (word == "shuffle") {
      st.shuffle = true;
      return st;
    }
    if (word == "perm") return perm();
    if (word == "cols") {
      Stage st;
      expect('(');
      st.cols = number(1, int64_t{1} << 40, "cols row length R");
      expect(')');
      return st;
    }
    if (word == "body" || word == "each" || word == "deal") {
      const std::string what = word == "body" ? "body(M)" : word == "each" ? "each(S)" : "deal(P,B)";
      expect('(');
      if (word == "deal") {
        st.deal = number(1, 65535, "deal hands P");
        expect(',');
        st.deal_block = number(1, int64_t{1} << 40, "deal block length B");
      } else {
        (word == "body" ? st.body : st.each) =
            number(1, int64_t{1} << 40, word == "body" ? "body multiple M" : "run length S");
      }
      expect(')');
      expect('[');
      skip_spaces();
      if (!done() && text_[pos_] == ']') fail("expected a stage inside " + what + "[...]");
      const size_t inside = pos_;
      st.inner = pipeline();
      if (!take(']')) fail(done() ? what + "[ is not closed by ']'" : "expected '|' or ']' in " + what + "[...]");
      if ((st.each > 0 || st.deal > 0) && (Schedule{st.inner}.nondeterministic()))
        fail_at(inside, what +
                            "[...] takes deterministic stages only (an atomic or a shuffle inside would need an "
                            "order of its own for every " +
                            (st.deal > 0 ? "hand)" : "run)"));
      return st;
    }
    if (word == "contig" || word == "strided" || word == "split") {
      st.grouping.kind = word == "contig"    ? Grouping::Kind::contig
                         : word == "strided" ? Grouping::Kind::strided
                                             : Grouping::Kind::split;
      expect('(');
      st.grouping.size = number(1, int64_t{1} << 40, "group size");
      expect(')');
    } else if (word == "all") {
      st.grouping.kind = Grouping::Kind::all;
    } else {
      fail_at(start, word.empty() ? "expected a stage (contig(G), strided(P), split(S), all, shuffle, perm(...), "
                                    "cols(R), body(M)[...], each(S)[...] or deal(P,B)[...])"
                                  : "unknown grouping '" + std::string(word) +
                                        "' (known: contig(G), strided(P), split(S), all, shuffle, perm(...), cols(R), "
                                        "body(M)[...], each(S)[...], deal(P,B)[...])");
    }
    expect(':');
    st.reducer = reducer();
    if (take('@')) {
      st.format = format('@');
      skip_spaces();
      const size_t at = pos_;
      if (take('>')) {
        st.hold = format('>');
        if (!holds_single_additions(st.reducer.kind))
          fail_at(at, "'>" + st.hold->name + "' holds the partials of single additions; " + to_string(st.reducer) +
                          " is not one (seq, rev, tree, shfl_down, shfl_up, shfl_xor, atomic, ring, numpy_pairwise, "
                          "torch_cascade(V), cub_reduce(T,I,V,G))");
      }
    }
    return st;
  }

  // perm(p0,...,p(L-1)): every index 0..L-1 exactly once.
  Stage perm() {
    Stage st;
    expect('(');
    const size_t first = pos_;
    do {
      skip_spaces();
      const size_t at = pos_;
      st.perm.push_back(number(0, kMaxPermLanes - 1, "perm lane index"));
      if (std::find(st.perm.begin(), st.perm.end() - 1, st.perm.back()) != st.perm.end() - 1)
        fail_at(at, "perm lane " + std::to_string(st.perm.back()) + " named twice");
    } while (take(','));
    expect(')');
    for (size_t k = 0; k < st.perm.size(); ++k)
      if (st.perm[k] >= static_cast<int64_t>(st.perm.size()))
        fail_at(first, "perm of " + std::to_string(st.perm.size()) + " lanes names lane " + std::to_string(st.perm[k]) +
                           " (each of 0.." + std::to_string(st.perm.size() - 1) + " once)");
    return st;
  }

  // "@FORMAT" or ">HOLD": any name fp::parse_format knows (fp64, fp32, bf16, e5m10, ...).
  fp::Format format(char after) {
    skip_spaces();
    const size_t at = pos_;
    const std::string_view name = identifier();
    if (name.empty()) fail(std::string("expected a format after '") + after + "' (fp64, fp32, fp16, bf16, eXmY, ...)");
    try {
      return fp::parse_format(name);
    } catch (const fp::FormatError& e) {
      fail_at(at, "unknown stage format '" + std::string(name) + "' (" + e.what() + ")");
    }
  }

  Reducer reducer() {
    skip_spaces();
    const size_t start = pos_;
    const std::string_view word = identifier();
    for (const auto& [kind, name] : kPlainReducers)
      if (word == name) return Reducer{kind};
    if (word == "torch_cascade") {  // PyTorch's CPU sum on V-lane vectors (sim/torch_cascade.hpp)
      Reducer r{RK::torch_cascade};
      expect('(');
      r.cascade_lanes = static_cast<int>(number(1, 64, "torch_cascade lanes V"));
      expect(')');
      return r;
    }
    if (word == "cub_reduce") {  // CUB's DeviceReduce::Sum (sim/cub_reduce.hpp)
      Reducer r{RK::cub_reduce};
      expect('(');
      r.cub.threads = static_cast<int>(number(32, 1024, "cub_reduce threads T"));
      if (r.cub.threads % 32) fail_at(start, "cub_reduce threads T must be a multiple of 32 (whole warps)");
      expect(',');
      r.cub.items = static_cast<int>(number(1, 64, "cub_reduce items a thread I"));
      expect(',');
      r.cub.vector = static_cast<int>(number(1, 16, "cub_reduce vector width V"));
      if (r.cub.items % r.cub.vector) fail_at(start, "cub_reduce items a thread I must be a multiple of its vector width V");
      expect(',');
      r.cub.grid = static_cast<int>(number(1, 1 << 20, "cub_reduce grid G"));
      expect(')');
      return r;
    }
    if (word == "fused") {
      Reducer r{RK::fused};
      expect('(');
      skip_spaces();
      if (!done() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) return named_fused();
      r.fused_products = static_cast<int>(number(1, 1024, "fused product count N"));
      expect(',');
      r.fused_fraction_bits = static_cast<int>(number(1, 1024, "fused fraction bits F"));
      if (take(',')) {
        skip_spaces();
        const size_t at = pos_;
        const std::string_view input = identifier();
        bool known_input = false;
        for (const auto& [kind, name] : kFusedInputs)
          if (kind != Reducer::Input::none && input == name) r.fused_input = kind, known_input = true;
        if (!known_input)
          fail_at(at, input.empty() ? "expected an input format (" + fused_input_names() + ")"
                                    : "unknown tensor-core input format '" + std::string(input) +
                                          "' (known: " + fused_input_names() + ")");
      }
      expect(')');
      return r;
    }
    std::string known;
    for (const auto& [kind, name] : kPlainReducers) known += std::string(name) + ", ";
    fail_at(start, word.empty() ? "expected a reducer after ':'"
                                : "unknown reducer '" + std::string(word) + "' (known: " + known +
                                      "torch_cascade(V), cub_reduce(T,I,V,G), fused(N,F), fused(N,F,INPUT), fused(MODEL))");
  }

  // fused(MODEL): a tensor-core model of the registry by name, e.g. fused(tc-h100-tf32).
  Reducer named_fused() {
    const size_t at = pos_;
    while (!done() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-' || text_[pos_] == '_'))
      ++pos_;
    const std::string_view name = text_.substr(at, pos_ - at);
    const TensorCoreModel* model = find_tensor_core_model(name);
    if (model == nullptr)
      fail_at(at, "unknown tensor-core model '" + std::string(name) + "' (known: " + tensor_core_model_list() + ")");
    expect(')');
    return fused_reducer(*model);
  }

  std::string_view identifier() {
    skip_spaces();
    const size_t start = pos_;
    while (!done() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  int64_t number(int64_t lo, int64_t hi, const char* what) {
    skip_spaces();
    const size_t start = pos_;
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
    if (ec != std::errc{}) fail(std::string("expected a whole number (") + what + ")");
    pos_ = static_cast<size_t>(end - text_.data());
    if (value < lo || value > hi)
      fail_at(start, std::string(what) + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                         std::to_string(value));
    return value;
  }

  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool take(char c) {
    skip_spaces();
    if (!done() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_spaces() {
    while (!done() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool done() const { return pos_ >= text_.size(); }

  [[noreturn]] void fail(const std::string& message) { fail_at(pos_, message); }
  [[noreturn]] void fail_at(size_t at, const std::string& message) {
    const std::string token = at < text_.size() ? std::string(text_.substr(at, 12)) : "end of text";
    throw ScheduleError("schedule '" + std::string(text_) + "': " + message + " at position " + std::to_string(at + 1) +
                            " ('" + token + "')",
                        at);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const char* to_string(Reducer::Input input) {
  for (const auto& [kind, name] : kFusedInputs)
    if (kind == input) return name.data();
  return "?";
}

std::string to_string(const Reducer& r) {
  if (r.kind == RK::torch_cascade) return "torch_cascade(" + std::to_string(r.cascade_lanes) + ")";
  if (r.kind == RK::cub_reduce)
    return "cub_reduce(" + std::to_string(r.cub.threads) + "," + std::to_string(r.cub.items) + "," +
           std::to_string(r.cub.vector) + "," + std::to_string(r.cub.grid) + ")";
  if (r.kind == RK::fused) {
    std::string text = "fused(" + std::to_string(r.fused_products) + "," + std::to_string(r.fused_fraction_bits);
    if (r.fused_input != Reducer::Input::none) text.append(",").append(to_string(r.fused_input));
    return text.append(")");
  }
  for (const auto& [kind, name] : kPlainReducers)
    if (kind == r.kind) return std::string(name);
  return "?";
}

std::string to_string(const Stage& st) {
  if (st.shuffle) return "shuffle";
  if (st.cols > 0) return "cols(" + std::to_string(st.cols) + ")";
  if (!st.perm.empty()) {
    std::string text = "perm(";
    for (size_t k = 0; k < st.perm.size(); ++k) text += (k ? "," : "") + std::to_string(st.perm[k]);
    return text + ")";
  }
  if (st.nests()) {
    std::string text = st.body > 0   ? "body(" + std::to_string(st.body) + ")["
                       : st.each > 0 ? "each(" + std::to_string(st.each) + ")["
                                     : "deal(" + std::to_string(st.deal) + "," + std::to_string(st.deal_block) + ")[";
    for (size_t k = 0; k < st.inner.size(); ++k) text += (k ? " | " : "") + to_string(st.inner[k]);
    return text + "]";
  }
  std::string g;
  switch (st.grouping.kind) {
    case Grouping::Kind::contig:
      g = "contig(" + std::to_string(st.grouping.size) + ")";
      break;
    case Grouping::Kind::strided:
      g = "strided(" + std::to_string(st.grouping.size) + ")";
      break;
    case Grouping::Kind::split:
      g = "split(" + std::to_string(st.grouping.size) + ")";
      break;
    case Grouping::Kind::all:
      g = "all";
      break;
  }
  return g + ":" + to_string(st.reducer) + (st.format ? "@" + st.format->name : "") +
         (st.hold ? ">" + st.hold->name : "");
}

std::string to_string(const Schedule& s) {
  std::string out;
  for (const Stage& st : s.stages) out += (out.empty() ? "" : " | ") + to_string(st);
  return out;
}

namespace {
template <class Pred>
bool any_stage(const std::vector<Stage>& stages, Pred pred) {
  for (const Stage& st : stages)
    if (pred(st) || any_stage(st.inner, pred)) return true;
  return false;
}
}  // namespace

bool Schedule::nondeterministic() const {
  return any_stage(stages, [](const Stage& st) { return st.shuffle || (st.reduces() && st.reducer.random()); });
}

bool Schedule::has_stage_formats() const {
  return any_stage(stages, [](const Stage& st) { return st.format.has_value(); });
}

bool Schedule::plain() const {
  return !any_stage(stages, [](const Stage& st) { return st.reorders() || st.nests() || st.format; });
}

bool Schedule::order_independent() const {
  // Only a single exact or binned reduction of everything is independent of the order;
  // shuffles before it cannot change it.
  for (const Stage& st : stages) {
    if (st.shuffle || st.reorders()) continue;
    return st.reduces() && !st.format && st.grouping.kind == Grouping::Kind::all &&
           (st.reducer.kind == RK::exact || st.reducer.kind == RK::binned);
  }
  return false;
}

Schedule parse_schedule(std::string_view text) {
  if (auto preset = expand_preset(text)) return *preset;
  return Reader(text).schedule();
}

std::vector<std::string> split_schedule_list(std::string_view list) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : list) {
    if (c == ',' && depth == 0) {
      items.emplace_back();
      continue;
    }
    depth += c == '(' ? 1 : c == ')' && depth > 0 ? -1 : 0;
    items.back() += c;
  }
  for (auto& item : items) {
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, item.find_last_not_of(" \t") - first + 1);
  }
  return items;
}

}  // namespace fplab::sim
