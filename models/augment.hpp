// Data augmentation, the algorithmic-noise source applied per example: a random crop with
// padding P (the image shifted by dy, dx in [-P, P], uncovered pixels filled with the
// background) followed by a horizontal flip with probability 1/2 — torchvision's
// RandomCrop(28, padding=P) then RandomHorizontalFlip(). The draw for an example is keyed by
// (algo seed, epoch, example index in the training set) (models/algo_noise.hpp), so a run
// resumed mid-epoch augments every remaining example exactly as the uninterrupted run would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "models/dataset.hpp"

namespace fplab::models {

struct Augmentation {
  int pad = 0;        // P: shifts in [-P, P]; 0 = no crop
  bool flip = false;  // horizontal flip with probability 1/2
  bool enabled() const { return pad > 0 || flip; }
};

struct AugmentDraw {
  int dy = 0, dx = 0;  // output (y, x) shows input (y + dy, x + dx) before flipping
  bool flip = false;
};

// The draw for one example: dy from sub-stream 0, dx from 1, the flip from 2, so turning one
// option off does not change the others' draws.
AugmentDraw draw_augmentation(uint64_t seed, uint64_t epoch, uint64_t example, const Augmentation& augmentation);

// out = crop-then-flip of in (channels x rows x cols each); `fill` for pixels shifted in from
// outside. in and out must not overlap. dy = dx = 0 without flip copies.
void augment_image(const float* in, float* out, int channels, int rows, int cols, const AugmentDraw& draw, float fill);

// The batch of `examples` (indices into `set`): images into out (examples.size() x
// set.image_size()), augmented by draw_augmentation(seed, epoch, example) when augmentation is
// enabled, with fill for the padding (normally Dataset::background()); labels into labels_out.
void make_batch(const ImageSet& set, std::span<const size_t> examples, const Augmentation& augmentation, uint64_t seed,
                uint64_t epoch, float fill, float* out, uint8_t* labels_out);

}  // namespace fplab::models
