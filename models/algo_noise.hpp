// Algorithmic noise: every random choice of the *training algorithm* (which examples, in which
// order, how augmented, which units dropped, the initial weights) draws from a counter-based
// stream keyed by the algorithmic seed, a purpose tag and the coordinates of the draw. Each draw
// can therefore be replayed in isolation (resuming mid-epoch reproduces it), and no draw depends
// on how many others were made before it. Implementation noise (sim/noise.hpp) uses the impl
// seed and never these keys; that is what separates the ALGO and IMPL variants (docs/architecture.md).
//
// The keys, in one place (key = fp::mix_key({algo_seed, purpose, a, b}), sub-stream s):
//   purpose    a                  b              s                 draws
//   subset     class              0              0                 partial Fisher-Yates in the class
//   imbalance  class              0              0                 partial Fisher-Yates in the class
//   shuffle    epoch              0              0                 Fisher-Yates of the epoch
//   augment    epoch              example index  0 dy, 1 dx, 2 flip (models/augment.hpp)
//   dropout    layer              step           0                 element i: position i
//   init       layer              0              0                 free for the initialiser
// "example index" is the index in the training set (not the position in the batch); "step" is
// the global optimiser step from the start of training (Context::call), never reset per epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fp/counter_rng.hpp"

namespace fplab::models {

// Tags are four ASCII letters; init and dropout are the values the layers use
// (models/init.hpp kInitStream, kDropoutStream, through Context::algo_stream), so that
// dropout_mask and init_stream give exactly the layers' draws.
enum class AlgoPurpose : uint64_t {
  subset = 0x73756273,     // "subs"
  imbalance = 0x696d6261,  // "imba"
  shuffle = 0x73687566,    // "shuf"
  augment = 0x6175676d,    // "augm"
  dropout = 0x64726f70,    // "drop"
  init = 0x696e6974,       // "init"
};

uint64_t algo_key(uint64_t algo_seed, AlgoPurpose purpose, uint64_t a = 0, uint64_t b = 0);
inline fp::CounterRng algo_stream(uint64_t algo_seed, AlgoPurpose purpose, uint64_t a = 0, uint64_t b = 0,
                                  uint64_t sub_stream = 0) {
  return fp::CounterRng(algo_key(algo_seed, purpose, a, b), sub_stream);
}

// n training examples, classes (0 to the largest label) as balanced as possible: n / classes each, the remainder one
// more to the lowest classes; a class with too few examples gives all it has and the others
// share its shortfall the same way. Chosen at random within each class; returned ascending.
// Throws std::invalid_argument if n exceeds labels.size() or a label is not a class.
std::vector<size_t> stratified_subset(std::span<const uint8_t> labels, size_t n, uint64_t seed);

// Of `indices` (training examples, e.g. a subset), keeps every example whose label is not
// `label`, and round(count * percent / 100) (half away from zero) of those that are, chosen at
// random. Returned ascending. percent in [0, 100].
std::vector<size_t> keep_percent_of_class(std::span<const uint8_t> labels, std::span<const size_t> indices,
                                          uint8_t label, double percent, uint64_t seed);

// What the data options select from the training set: a stratified subset (0: all), then
// optionally a class cut to `imbalance_percent` of its examples in that subset.
struct TrainSelection {
  size_t subset = 0;
  int imbalance_class = -1;  // -1: none
  double imbalance_percent = 100;
};
std::vector<size_t> select_training_examples(std::span<const uint8_t> labels, const TrainSelection& selection,
                                             uint64_t seed);

// The order of epoch `epoch`: a permutation of 0..count-1 (positions in the selected examples),
// by Fisher-Yates from the epoch's own stream.
std::vector<size_t> epoch_order(size_t count, uint64_t seed, uint64_t epoch);

// Dropout: whether element `index` of layer `layer`'s activations at step `step` is kept, with
// drop probability p_drop (kept iff a uniform [0,1) draw is >= p_drop). The caller scales kept
// values by 1 / (1 - p_drop).
bool dropout_keep(uint64_t seed, uint64_t layer, uint64_t step, uint64_t index, double p_drop);
// The same decisions for elements 0..count-1: keep[i] = dropout_keep(seed, layer, step, i, p_drop).
void dropout_mask(uint64_t seed, uint64_t layer, uint64_t step, double p_drop, std::span<uint8_t> keep);

// The stream a weight initialiser draws layer `layer`'s weights from (layers numbered in model
// order, as Context::layer).
inline fp::CounterRng init_stream(uint64_t seed, uint64_t layer) { return algo_stream(seed, AlgoPurpose::init, layer); }

}  // namespace fplab::models
