// gpu_mma_validate: the printed rows, variant scores and summary table, and the JSON of a row.

#include <cstdio>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

void print_classes(const Row& r, const std::vector<Candidate>& cands) {
  std::vector<std::pair<std::string, ClassInfo>> classes(r.tally.classes.begin(), r.tally.classes.end());
  std::sort(classes.begin(), classes.end(), [](auto& x, auto& y) { return x.second.count > y.second.count; });
  for (const auto& [name, c] : classes) {
    std::string explained;
    for (const Candidate& cand : cands)
      if (auto it = c.explained.find(cand.name); it != c.explained.end())
        explained += (explained.empty() ? "" : ", ") + cand.name + " " + std::to_string(it->second) + "/" +
                     std::to_string(c.detailed);
    std::printf("    %-62s %10lld  max %lld ulps; reproduced by: %s\n", name.c_str(), static_cast<long long>(c.count),
                static_cast<long long>(c.max_ulps), explained.empty() ? "none of the variants" : explained.c_str());
    if (!c.examples.empty()) std::printf("      e.g. %s\n", c.examples[0].dump().c_str());
  }
}

json row_json(const Row& r, const std::vector<Candidate>& cands) {
  json classes = json::object();
  for (const auto& [name, c] : r.tally.classes)
    classes[name] = {{"count", c.count},
                     {"max_ulps", c.max_ulps},
                     {"detailed", c.detailed},
                     {"reproduced_by", c.explained},
                     {"examples", c.examples}};
  json variants = json::object();
  for (size_t i = 0; i < cands.size() && i < r.tally.candidate_agree.size(); ++i)
    variants[cands[i].name] = r.tally.candidate_agree[i];
  return {{"path", to_string(r.path)},
          {"input", to_string(r.input)},
          {"instruction", mma_instruction(r.input, r.path)},
          {"model", model_name(r.input, r.path)},
          {"set", kSets[r.set].name},
          {"k", r.k},
          {"tiles", r.tiles},
          {"outputs", r.tally.outputs},
          {"identical", r.tally.identical},
          {"identical_with_chip_rules", r.tally.identical + r.tally.by_rules},
          {"max_ulps", r.tally.max_ulps},
          {"classes", classes},
          {"variant_outputs", r.tally.candidate_outputs},
          {"variant_identical", variants}};
}

// Scores of the variants over the sample tiles of every set of one (path, input).
void print_variants(const std::vector<Row>& rows, MmaPath path, MmaInput in, const std::vector<Candidate>& cands) {
  std::vector<int64_t> agree(cands.size(), 0);
  int64_t total = 0;
  for (const Row& r : rows)
    if (r.path == path && r.input == in) {
      total += r.tally.candidate_outputs;
      for (size_t i = 0; i < r.tally.candidate_agree.size(); ++i) agree[i] += r.tally.candidate_agree[i];
    }
  if (total == 0) return;
  std::printf("  variants of %s on %lld sampled outputs of %s %s (bit-identical %%):", model_name(in, path).c_str(),
              static_cast<long long>(total), to_string(path), to_string(in));
  for (size_t i = 0; i < cands.size(); ++i)
    std::printf("%s %s %.4f", i % 4 == 0 ? "\n   " : ";", cands[i].name.c_str(), 100.0 * agree[i] / total);
  std::printf("\n");
}

std::string percent(int64_t part, int64_t whole) {
  char s[32];
  if (part == whole) return "100%";
  std::snprintf(s, sizeof s, "%.4f%%", std::floor(1e6 * static_cast<double>(part) / whole) / 1e4);  // never shows 100
  return s;
}

void print_table(const std::vector<Row>& rows) {
  std::printf(
      "\ninput | path | model | test set | K | tiles | outputs | bit-identical | with the chip rules | max ulps | "
      "mismatch classes\n");
  std::printf("---|---|---|---|---|---|---|---|---|---|---\n");
  for (const Row& r : rows) {
    std::string classes;
    for (const auto& [name, c] : r.tally.classes)
      classes += (classes.empty() ? "" : "; ") + name + ": " + std::to_string(c.count);
    std::printf("%s | %s | %s | %s | %zu | %zu | %lld | %s | %s | %lld | %s\n", to_string(r.input), to_string(r.path),
                model_name(r.input, r.path).c_str(), kSets[r.set].name.c_str(), r.k, r.tiles,
                static_cast<long long>(r.tally.outputs), percent(r.tally.identical, r.tally.outputs).c_str(),
                percent(r.tally.identical + r.tally.by_rules, r.tally.outputs).c_str(),
                static_cast<long long>(r.tally.max_ulps), classes.empty() ? "-" : classes.c_str());
  }
}

}  // namespace fplab::tools::gpu::mma
