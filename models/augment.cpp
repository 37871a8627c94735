#include "models/augment.hpp"

#include <algorithm>

#include "models/algo_noise.hpp"

namespace fplab::models {

AugmentDraw draw_augmentation(uint64_t seed, uint64_t epoch, uint64_t example, const Augmentation& augmentation) {
  AugmentDraw draw;
  const auto stream = [&](uint64_t sub) { return algo_stream(seed, AlgoPurpose::augment, epoch, example, sub); };
  if (augmentation.pad > 0) {
    const auto span = static_cast<uint64_t>(2 * augmentation.pad + 1);
    draw.dy = static_cast<int>(stream(0).below(span)) - augmentation.pad;
    draw.dx = static_cast<int>(stream(1).below(span)) - augmentation.pad;
  }
  if (augmentation.flip) draw.flip = (stream(2).next() >> 63) != 0;
  return draw;
}

void augment_image(const float* in, float* out, int channels, int rows, int cols, const AugmentDraw& draw, float fill) {
  for (int c = 0; c < channels; ++c) {
    const float* plane = in + static_cast<size_t>(c) * rows * cols;
    float* target = out + static_cast<size_t>(c) * rows * cols;
    for (int y = 0; y < rows; ++y) {
      float* row = target + static_cast<size_t>(y) * cols;
      const int source_y = y + draw.dy;
      if (source_y < 0 || source_y >= rows) {
        std::fill(row, row + cols, fill);
        continue;
      }
      const float* source = plane + static_cast<size_t>(source_y) * cols;
      for (int x = 0; x < cols; ++x) {
        const int source_x = (draw.flip ? cols - 1 - x : x) + draw.dx;
        row[x] = source_x >= 0 && source_x < cols ? source[source_x] : fill;
      }
    }
  }
}

void make_batch(const ImageSet& set, std::span<const size_t> examples, const Augmentation& augmentation, uint64_t seed,
                uint64_t epoch, float fill, float* out, uint8_t* labels_out) {
  const size_t size = set.image_size();
  for (size_t b = 0; b < examples.size(); ++b) {
    const size_t example = examples[b];
    float* target = out + b * size;
    if (augmentation.enabled())
      augment_image(set.image(example), target, set.channels, set.rows, set.cols,
                    draw_augmentation(seed, epoch, example, augmentation), fill);
    else
      std::copy(set.image(example), set.image(example) + size, target);
    labels_out[b] = set.labels[example];
  }
}

}  // namespace fplab::models
