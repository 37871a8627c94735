// The algorithmic-noise pipeline: subsets, class imbalance, epoch orders, augmentation and
// dropout draw only from the algorithmic seed through the documented keys, reproducibly per
// key, and with the distributions they claim (checked statistically with loose bounds that a
// biased implementation still fails).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "models/algo_noise.hpp"
#include "models/augment.hpp"

using namespace fplab::models;
namespace fp = fplab::fp;

namespace {

// Labels with `per_class[c]` examples of class c, interleaved pseudo-randomly.
std::vector<uint8_t> labels_with(const std::array<size_t, 10>& per_class, uint32_t seed = 1) {
  std::vector<uint8_t> labels;
  for (int c = 0; c < 10; ++c) labels.insert(labels.end(), per_class[c], static_cast<uint8_t>(c));
  std::shuffle(labels.begin(), labels.end(), std::mt19937(seed));
  return labels;
}

std::array<size_t, 10> histogram(const std::vector<uint8_t>& labels, const std::vector<size_t>& indices) {
  std::array<size_t, 10> h{};
  for (size_t i : indices) ++h.at(labels.at(i));
  return h;
}

bool ascending_unique(const std::vector<size_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), [](size_t a, size_t b) { return a >= b; }) == v.end();
}

// Pearson's chi-square statistic of counts against equal expectation.
double chi_square(const std::vector<size_t>& counts) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const double expected = total / static_cast<double>(counts.size());
  double x = 0;
  for (size_t c : counts) x += (c - expected) * (c - expected) / expected;
  return x;
}

ImageSet numbered_images(size_t n, int channels, int rows, int cols) {
  ImageSet set;
  set.channels = channels;
  set.rows = rows;
  set.cols = cols;
  set.images.resize(n * set.image_size());
  std::iota(set.images.begin(), set.images.end(), 1.0f);
  set.labels.resize(n);
  for (size_t i = 0; i < n; ++i) set.labels[i] = static_cast<uint8_t>(i % 10);
  return set;
}

}  // namespace

TEST_CASE("subset: n/10 per class, the remainder to the lowest classes, ascending and without duplicates") {
  const auto labels = labels_with({6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000});
  const auto s = stratified_subset(labels, 10000, 7);
  REQUIRE(s.size() == 10000);
  CHECK(ascending_unique(s));
  CHECK(s.back() < labels.size());
  for (size_t c : histogram(labels, s)) CHECK(c == 1000);
  const auto odd = stratified_subset(labels, 1005, 7);
  CHECK(histogram(labels, odd) == std::array<size_t, 10>{101, 101, 101, 101, 101, 100, 100, 100, 100, 100});
  CHECK(stratified_subset(labels, 0, 7).empty());
  const auto all = stratified_subset(labels, labels.size(), 7);
  std::vector<size_t> every(labels.size());
  std::iota(every.begin(), every.end(), 0);
  CHECK(all == every);
  CHECK_THROWS_AS(stratified_subset(labels, labels.size() + 1, 7), std::invalid_argument);
}

TEST_CASE("subset: a class with too few examples gives all it has, the others share the shortfall") {
  const auto labels = labels_with({500, 500, 500, 20, 500, 500, 500, 500, 500, 500});
  const auto s = stratified_subset(labels, 1000, 3);
  // 980 over the other nine classes: 108 each, 8 more to the lowest eight.
  CHECK(histogram(labels, s) == std::array<size_t, 10>{109, 109, 109, 20, 109, 109, 109, 109, 109, 108});
  CHECK(ascending_unique(s));
}

TEST_CASE("subset: the same seed gives the same subset, another seed another") {
  const auto labels = labels_with({600, 600, 600, 600, 600, 600, 600, 600, 600, 600});
  CHECK(stratified_subset(labels, 1000, 11) == stratified_subset(labels, 1000, 11));
  CHECK(stratified_subset(labels, 1000, 11) != stratified_subset(labels, 1000, 12));
}

TEST_CASE("subset: every member of a class is equally likely to be chosen") {
  // 10 classes of 8 examples, 30 chosen (3 per class): each example with probability 3/8.
  const auto labels = labels_with({8, 8, 8, 8, 8, 8, 8, 8, 8, 8});
  std::vector<size_t> chosen(labels.size());
  const int trials = 4000;
  for (int seed = 0; seed < trials; ++seed)
    for (size_t i : stratified_subset(labels, 30, static_cast<uint64_t>(seed))) ++chosen[i];
  // 79 degrees of freedom: chi-square above 140 has probability < 1e-5.
  CHECK(chi_square(chosen) < 140);
}

TEST_CASE("imbalance: keeps round(p% of the class) of it, all of the others, seeded") {
  const auto labels = labels_with({6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000});
  std::vector<size_t> every(labels.size());
  std::iota(every.begin(), every.end(), 0);
  const auto kept = keep_percent_of_class(labels, every, 3, 10, 5);
  auto expected = std::array<size_t, 10>{6000, 6000, 6000, 600, 6000, 6000, 6000, 6000, 6000, 6000};
  CHECK(histogram(labels, kept) == expected);
  CHECK(ascending_unique(kept));
  CHECK(kept == keep_percent_of_class(labels, every, 3, 10, 5));
  CHECK(kept != keep_percent_of_class(labels, every, 3, 10, 6));
  CHECK(histogram(labels, keep_percent_of_class(labels, every, 3, 2.5, 5))[3] == 150);
  CHECK(histogram(labels, keep_percent_of_class(labels, every, 3, 0.01, 5))[3] == 1);  // 0.6 rounds to 1
  CHECK(histogram(labels, keep_percent_of_class(labels, every, 3, 0, 5))[3] == 0);
  CHECK(keep_percent_of_class(labels, every, 3, 100, 5) == every);
  CHECK_THROWS_AS(keep_percent_of_class(labels, every, 3, 101, 5), std::invalid_argument);
  CHECK_THROWS_AS(keep_percent_of_class(labels, every, 10, 50, 5), std::invalid_argument);
}

TEST_CASE("selection: a stratified subset, then a class cut within it") {
  const auto labels = labels_with({6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000});
  TrainSelection selection;
  selection.subset = 10000;
  selection.imbalance_class = 9;
  selection.imbalance_percent = 5;
  const auto chosen = select_training_examples(labels, selection, 21);
  CHECK(histogram(labels, chosen) == std::array<size_t, 10>{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 50});
  const auto subset = stratified_subset(labels, 10000, 21);
  CHECK(std::includes(subset.begin(), subset.end(), chosen.begin(), chosen.end()));
  CHECK(select_training_examples(labels, {}, 21).size() == labels.size());
}

TEST_CASE("epoch order: a permutation, reproducible per (seed, epoch), different across epochs and seeds") {
  const size_t n = 10000;
  const auto order = epoch_order(n, 1, 0);
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> every(n);
  std::iota(every.begin(), every.end(), 0);
  CHECK(sorted == every);
  CHECK(order == epoch_order(n, 1, 0));
  CHECK(order != epoch_order(n, 1, 1));
  CHECK(order != epoch_order(n, 2, 0));
  CHECK(order != every);
  CHECK(epoch_order(0, 1, 0).empty());
  CHECK(epoch_order(1, 1, 0) == std::vector<size_t>{0});
}

TEST_CASE("epoch order: all permutations of four are equally likely") {
  std::map<std::vector<size_t>, size_t> seen;
  const int trials = 48000;
  for (int epoch = 0; epoch < trials; ++epoch) ++seen[epoch_order(4, 99, static_cast<uint64_t>(epoch))];
  REQUIRE(seen.size() == 24);
  std::vector<size_t> counts;
  for (const auto& [perm, count] : seen) counts.push_back(count);
  // 23 degrees of freedom: chi-square above 60 has probability < 1e-4.
  CHECK(chi_square(counts) < 60);
}

TEST_CASE("keys: the streams are the documented mix_key tuples (the layers share the init and dropout ones)") {
  const uint64_t seed = 12345, layer = 3, step = 77;
  const fp::CounterRng drop(fp::mix_key({seed, 0x64726f70, layer, step}));
  std::vector<uint8_t> mask(1000);
  dropout_mask(seed, layer, step, 0.3, mask);
  size_t wrong = 0;
  for (size_t i = 0; i < mask.size(); ++i) wrong += mask[i] != (static_cast<double>(drop.at(i) >> 11) * 0x1p-53 >= 0.3);
  CHECK(wrong == 0);
  fp::CounterRng init(fp::mix_key({seed, 0x696e6974, layer, 0}));
  fp::CounterRng ours = init_stream(seed, layer);
  for (int i = 0; i < 10; ++i) CHECK(ours.next() == init.next());
  fp::CounterRng shuffle(fp::mix_key({seed, 0x73687566, 4, 0}));
  auto expected = std::vector<size_t>(50);
  std::iota(expected.begin(), expected.end(), 0);
  for (size_t i = expected.size(); i > 1; --i) std::swap(expected[i - 1], expected[shuffle.below(i)]);
  CHECK(epoch_order(50, seed, 4) == expected);
}

TEST_CASE("dropout: keep decisions are per element, reproducible in isolation, kept with probability 1 - p") {
  std::vector<uint8_t> mask(100000);
  dropout_mask(5, 2, 10, 0.25, mask);
  const size_t kept = static_cast<size_t>(std::count(mask.begin(), mask.end(), 1));
  CHECK(kept > 74400);  // 75000 +- 4.3 standard deviations
  CHECK(kept < 75600);
  for (size_t i : {0, 1, 999, 99999}) CHECK(dropout_keep(5, 2, 10, i, 0.25) == (mask[i] != 0));
  std::vector<uint8_t> prefix(10);
  dropout_mask(5, 2, 10, 0.25, prefix);
  CHECK(std::equal(prefix.begin(), prefix.end(), mask.begin()));
  std::vector<uint8_t> other(100000);
  dropout_mask(5, 2, 11, 0.25, other);
  CHECK(other != mask);
  dropout_mask(5, 3, 10, 0.25, other);
  CHECK(other != mask);
  dropout_mask(5, 2, 10, 0.0, other);
  CHECK(std::count(other.begin(), other.end(), 1) == 100000);
  dropout_mask(5, 2, 10, 1.0, other);
  CHECK(std::count(other.begin(), other.end(), 1) == 0);
}

TEST_CASE("augmentation: draws are reproducible per (seed, epoch, example), shifts uniform in [-P, P], flips 1/2") {
  const Augmentation both{4, true};
  std::vector<size_t> dy(9), dx(9);
  size_t flips = 0, same_as_previous = 0;
  const int n = 18000;
  AugmentDraw previous;
  for (int e = 0; e < n; ++e) {
    const AugmentDraw d = draw_augmentation(8, 2, static_cast<uint64_t>(e), both);
    const AugmentDraw again = draw_augmentation(8, 2, static_cast<uint64_t>(e), both);
    REQUIRE((d.dy == again.dy && d.dx == again.dx && d.flip == again.flip));
    REQUIRE(d.dy >= -4);
    REQUIRE(d.dy <= 4);
    REQUIRE(d.dx >= -4);
    REQUIRE(d.dx <= 4);
    ++dy[d.dy + 4];
    ++dx[d.dx + 4];
    flips += d.flip;
    same_as_previous += d.dy == previous.dy && d.dx == previous.dx && d.flip == previous.flip;
    previous = d;
  }
  // 8 degrees of freedom: chi-square above 35 has probability < 1e-4.
  CHECK(chi_square(dy) < 35);
  CHECK(chi_square(dx) < 35);
  CHECK(flips > 8700);  // 9000 +- 4.5 standard deviations
  CHECK(flips < 9300);
  CHECK(same_as_previous < 250);  // about n / 162 = 111 by chance
  // Another epoch draws differently for the same example.
  size_t same_across_epochs = 0;
  for (int e = 0; e < 1000; ++e) {
    const AugmentDraw a = draw_augmentation(8, 2, static_cast<uint64_t>(e), both);
    const AugmentDraw b = draw_augmentation(8, 3, static_cast<uint64_t>(e), both);
    same_across_epochs += a.dy == b.dy && a.dx == b.dx && a.flip == b.flip;
  }
  CHECK(same_across_epochs < 30);
  // Options off draw nothing; switching one off leaves the other's draws unchanged.
  const AugmentDraw crop_only = draw_augmentation(8, 2, 5, {4, false});
  const AugmentDraw full = draw_augmentation(8, 2, 5, both);
  CHECK((crop_only.dy == full.dy && crop_only.dx == full.dx && !crop_only.flip));
  CHECK(draw_augmentation(8, 2, 5, {0, true}).flip == full.flip);
  const AugmentDraw none = draw_augmentation(8, 2, 5, {});
  CHECK((none.dy == 0 && none.dx == 0 && !none.flip));
}

TEST_CASE("augmentation: shift 0 without flip is the identity; shifts and flips move pixels as defined") {
  const int c = 2, h = 5, w = 7;
  const ImageSet set = numbered_images(1, c, h, w);
  const float* in = set.image(0);
  std::vector<float> out(set.image_size());
  augment_image(in, out.data(), c, h, w, {}, -9.0f);
  CHECK(std::equal(out.begin(), out.end(), in));
  const auto at = [&](const float* img, int ch, int y, int x) { return img[(ch * h + y) * w + x]; };
  for (int dy = -3; dy <= 3; ++dy)
    for (int dx = -3; dx <= 3; ++dx)
      for (bool flip : {false, true}) {
        augment_image(in, out.data(), c, h, w, {dy, dx, flip}, -9.0f);
        size_t wrong = 0;
        for (int ch = 0; ch < c; ++ch)
          for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
              // Crop of the padded image at offset (P + dy, P + dx), then mirror the columns.
              const int cx = flip ? w - 1 - x : x;
              const int sy = y + dy, sx = cx + dx;
              const float want = sy >= 0 && sy < h && sx >= 0 && sx < w ? at(in, ch, sy, sx) : -9.0f;
              wrong += at(out.data(), ch, y, x) != want;
            }
        INFO("dy " << dy << " dx " << dx << " flip " << flip);
        CHECK(wrong == 0);
      }
  // Flipping twice gives the image back.
  std::vector<float> twice(set.image_size());
  augment_image(in, out.data(), c, h, w, {0, 0, true}, 0.0f);
  augment_image(out.data(), twice.data(), c, h, w, {0, 0, true}, 0.0f);
  CHECK(std::equal(twice.begin(), twice.end(), in));
}

TEST_CASE("augmentation: a batch depends only on its examples, so a resumed epoch reproduces it") {
  const ImageSet set = numbered_images(40, 1, 28, 28);
  const Augmentation aug{4, true};
  const size_t size = set.image_size();
  const std::vector<size_t> whole = {7, 3, 31, 12, 0, 25};
  std::vector<float> batch(whole.size() * size);
  std::vector<uint8_t> labels(whole.size());
  make_batch(set, whole, aug, 17, 5, -0.5f, batch.data(), labels.data());
  const std::vector<size_t> tail = {12, 0, 25};  // the last three, assembled after a restart
  std::vector<float> resumed(tail.size() * size);
  std::vector<uint8_t> resumed_labels(tail.size());
  make_batch(set, tail, aug, 17, 5, -0.5f, resumed.data(), resumed_labels.data());
  CHECK(std::equal(resumed.begin(), resumed.end(), batch.begin() + 3 * static_cast<std::ptrdiff_t>(size)));
  for (size_t b = 0; b < whole.size(); ++b) {
    CHECK(labels[b] == set.labels[whole[b]]);
    std::vector<float> one(size);
    augment_image(set.image(whole[b]), one.data(), 1, 28, 28, draw_augmentation(17, 5, whole[b], aug), -0.5f);
    CHECK(std::equal(one.begin(), one.end(), batch.begin() + static_cast<std::ptrdiff_t>(b * size)));
  }
  // Without augmentation the batch is the images themselves.
  make_batch(set, whole, {}, 17, 5, -0.5f, batch.data(), labels.data());
  for (size_t b = 0; b < whole.size(); ++b)
    CHECK(std::equal(set.image(whole[b]), set.image(whole[b]) + size,
                     batch.begin() + static_cast<std::ptrdiff_t>(b * size)));
}
