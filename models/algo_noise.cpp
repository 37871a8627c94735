#include "models/algo_noise.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/dataset.hpp"

namespace fplab::models {
namespace {

// The first k elements of `items` become a uniformly random k-subset (in random order).
void partial_shuffle(std::vector<size_t>& items, size_t k, fp::CounterRng rng) {
  for (size_t i = 0; i < k && i + 1 < items.size(); ++i) {
    const size_t j = i + static_cast<size_t>(rng.below(items.size() - i));
    std::swap(items[i], items[j]);
  }
}

// The classes of a training set: 0 to its largest label.
size_t class_count(std::span<const uint8_t> labels) {
  size_t classes = 0;
  for (uint8_t label : labels) classes = std::max<size_t>(classes, size_t{label} + 1);
  return classes;
}

// The examples of `indices` by class (class_count(labels) lists, each ascending if indices are).
std::vector<std::vector<size_t>> by_class(std::span<const uint8_t> labels, std::span<const size_t> indices) {
  std::vector<std::vector<size_t>> members(class_count(labels));
  for (size_t i : indices) {
    if (i >= labels.size()) throw std::invalid_argument("example index " + std::to_string(i) + " out of range");
    members[labels[i]].push_back(i);
  }
  return members;
}

std::vector<size_t> all_indices(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

uint64_t algo_key(uint64_t algo_seed, AlgoPurpose purpose, uint64_t a, uint64_t b) {
  return fp::mix_key({algo_seed, static_cast<uint64_t>(purpose), a, b});
}

std::vector<size_t> stratified_subset(std::span<const uint8_t> labels, size_t n, uint64_t seed) {
  if (n > labels.size())
    throw std::invalid_argument("a subset of " + std::to_string(n) + " examples was asked for, the training set has " +
                                std::to_string(labels.size()));
  auto members = by_class(labels, all_indices(labels.size()));
  // Water-filling: one more example to each class that still has some, lowest classes first.
  const size_t classes = members.size();
  std::vector<size_t> quota(classes);
  size_t left = n;
  while (left > 0) {
    size_t open = 0;
    for (size_t c = 0; c < classes; ++c)
      if (quota[c] < members[c].size()) ++open;
    const size_t whole_rounds = left / open;  // open > 0 since n <= labels.size()
    for (size_t c = 0; c < classes && left > 0; ++c) {
      if (quota[c] >= members[c].size()) continue;
      const size_t give = whole_rounds > 0 ? std::min(whole_rounds, members[c].size() - quota[c]) : 1;
      quota[c] += give;
      left -= give;
    }
  }
  std::vector<size_t> chosen;
  chosen.reserve(n);
  for (size_t c = 0; c < classes; ++c) {
    partial_shuffle(members[c], quota[c], algo_stream(seed, AlgoPurpose::subset, static_cast<uint64_t>(c)));
    chosen.insert(chosen.end(), members[c].begin(), members[c].begin() + static_cast<std::ptrdiff_t>(quota[c]));
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<size_t> keep_percent_of_class(std::span<const uint8_t> labels, std::span<const size_t> indices,
                                          uint8_t label, double percent, uint64_t seed) {
  if (!(percent >= 0 && percent <= 100))
    throw std::invalid_argument("the percentage of a class to keep must be in [0, 100], got " +
                                std::to_string(percent));
  if (label >= class_count(labels)) throw std::invalid_argument("class " + std::to_string(label) + " does not exist");
  auto members = by_class(labels, indices);
  std::vector<size_t>& cut = members[label];
  const auto keep = static_cast<size_t>(std::llround(static_cast<double>(cut.size()) * percent / 100.0));
  partial_shuffle(cut, keep, algo_stream(seed, AlgoPurpose::imbalance, label));
  cut.resize(keep);
  std::vector<size_t> kept;
  for (const auto& m : members) kept.insert(kept.end(), m.begin(), m.end());
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<size_t> select_training_examples(std::span<const uint8_t> labels, const TrainSelection& selection,
                                             uint64_t seed) {
  std::vector<size_t> chosen =
      selection.subset == 0 ? all_indices(labels.size()) : stratified_subset(labels, selection.subset, seed);
  // Checked before the narrowing to a label: class 260 must not become class 4.
  const size_t classes = class_count(labels);
  if (selection.imbalance_class >= static_cast<int>(classes))
    throw std::invalid_argument("imbalance class " + std::to_string(selection.imbalance_class) +
                                " does not exist (classes 0 to " + std::to_string(classes - 1) + ")");
  if (selection.imbalance_class >= 0)
    chosen = keep_percent_of_class(labels, chosen, static_cast<uint8_t>(selection.imbalance_class),
                                   selection.imbalance_percent, seed);
  return chosen;
}

std::vector<size_t> epoch_order(size_t count, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order = all_indices(count);
  fp::CounterRng rng = algo_stream(seed, AlgoPurpose::shuffle, epoch);
  for (size_t i = count; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(rng.below(i))]);
  return order;
}

bool dropout_keep(uint64_t seed, uint64_t layer, uint64_t step, uint64_t index, double p_drop) {
  const fp::CounterRng rng = algo_stream(seed, AlgoPurpose::dropout, layer, step);
  return static_cast<double>(rng.at(index) >> 11) * 0x1p-53 >= p_drop;
}

void dropout_mask(uint64_t seed, uint64_t layer, uint64_t step, double p_drop, std::span<uint8_t> keep) {
  const fp::CounterRng rng = algo_stream(seed, AlgoPurpose::dropout, layer, step);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<double>(rng.at(i) >> 11) * 0x1p-53 >= p_drop;
}

}  // namespace fplab::models
