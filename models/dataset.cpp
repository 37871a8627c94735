// Assumptions: fewer than 2^40 pixels per split (the squared sums fit in 128 bits with room).
#include "models/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <utility>

#include "models/idx.hpp"
#include "util/whole_file.hpp"

namespace fplab::models {
namespace {

struct RawSplit {
  IdxArray images, labels;
};

RawSplit read_split(const std::string& images_path, const std::string& labels_path) {
  RawSplit raw{read_idx(images_path, kIdxImagesMagic, "pixels"), read_idx(labels_path, kIdxLabelsMagic, "labels")};
  if (raw.images.dims[0] != raw.labels.dims[0])
    throw DataError(labels_path, std::to_string(raw.labels.dims[0]) + " labels, but " + images_path + " has " +
                                     std::to_string(raw.images.dims[0]) + " images");
  return raw;
}

ImageSet normalised(RawSplit&& raw, const Normalisation& normalisation) {
  std::array<float, 256> table;
  for (int x = 0; x < 256; ++x) table[x] = normalisation.apply(static_cast<uint8_t>(x));
  ImageSet set;
  set.channels = 1;
  set.rows = static_cast<int>(raw.images.dims[1]);
  set.cols = static_cast<int>(raw.images.dims[2]);
  set.images.resize(raw.images.data.size());
  for (size_t i = 0; i < raw.images.data.size(); ++i) set.images[i] = table[raw.images.data[i]];
  set.labels = std::move(raw.labels.data);
  return set;
}

std::string shape(const IdxArray& images) {
  return std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]);
}

}  // namespace

DatasetFiles fashion_mnist_files(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  return {base + "train-images-idx3-ubyte.gz", base + "train-labels-idx1-ubyte.gz", base + "t10k-images-idx3-ubyte.gz",
          base + "t10k-labels-idx1-ubyte.gz"};
}

Normalisation pixel_statistics(const std::vector<uint8_t>& pixels) {
  // Integer sums are exact and independent of summation order: the statistics are the same
  // bits on every machine.
  unsigned __int128 sum = 0, sum_squares = 0;
  for (uint8_t x : pixels) {
    sum += x;
    sum_squares += uint32_t{x} * x;
  }
  const auto n = static_cast<unsigned __int128>(pixels.size());
  if (n == 0) return {};
  // variance * (255 n)^2 = n * sum_squares - sum^2, exactly.
  const unsigned __int128 scaled_variance = n * sum_squares - sum * sum;
  const double scale = 255.0 * static_cast<double>(pixels.size());
  Normalisation result;
  result.mean = static_cast<double>(sum) / scale;
  result.std = std::sqrt(static_cast<double>(scaled_variance)) / scale;
  if (!(result.std > 0)) result.std = 1;  // constant images: nothing to scale
  return result;
}

Dataset load_idx_dataset(const DatasetFiles& files, std::vector<std::string> class_names) {
  RawSplit train = read_split(files.train_images, files.train_labels);
  RawSplit test = read_split(files.test_images, files.test_labels);
  if (train.images.dims[0] == 0) throw DataError(files.train_images, "no images");
  if (test.images.dims[1] != train.images.dims[1] || test.images.dims[2] != train.images.dims[2])
    throw DataError(files.test_images, "images are " + shape(test.images) + ", but the training images (" +
                                           files.train_images + ") are " + shape(train.images));
  Dataset dataset;
  dataset.normalisation = pixel_statistics(train.images.data);
  dataset.train = normalised(std::move(train), dataset.normalisation);
  dataset.test = normalised(std::move(test), dataset.normalisation);
  if (class_names.empty()) {
    size_t classes = 0;
    for (const ImageSet* set : {&dataset.train, &dataset.test})
      for (uint8_t label : set->labels) classes = std::max<size_t>(classes, size_t{label} + 1);
    for (size_t c = 0; c < classes; ++c) class_names.push_back(std::to_string(c));
  }
  const std::pair<const ImageSet*, const std::string*> splits[] = {{&dataset.train, &files.train_labels},
                                                                   {&dataset.test, &files.test_labels}};
  for (const auto& [set, path] : splits)
    for (size_t i = 0; i < set->labels.size(); ++i)
      if (set->labels[i] >= class_names.size())
        throw DataError(*path, "label " + std::to_string(set->labels[i]) + " of example " + std::to_string(i) +
                                   " is not a class (0.." + std::to_string(class_names.size() - 1) + ")");
  if (class_names.size() < 2) throw DataError(files.train_labels, "fewer than two classes: nothing to classify");
  dataset.train.classes = dataset.test.classes = class_names.size();
  dataset.class_names = std::move(class_names);
  return dataset;
}

Dataset load_fashion_mnist(const std::string& dir) {
  const DatasetFiles files = fashion_mnist_files(dir);
  Dataset dataset = load_idx_dataset(files, {kFashionMnistClassNames.begin(), kFashionMnistClassNames.end()});
  const auto check = [](const ImageSet& set, const std::string& path, size_t expected, const char* split) {
    if (set.rows != kFashionMnistSide || set.cols != kFashionMnistSide)
      throw DataError(path, "images are " + std::to_string(set.rows) + "x" + std::to_string(set.cols) +
                                ", Fashion-MNIST's are 28x28");
    if (set.size() != expected)
      throw DataError(path, std::to_string(set.size()) + " images, the Fashion-MNIST " + split + " set has " +
                                std::to_string(expected));
  };
  check(dataset.train, files.train_images, kFashionMnistTrainSize, "training");
  check(dataset.test, files.test_images, kFashionMnistTestSize, "test");
  return dataset;
}

Dataset load_image_dataset(const std::string& dir) {
  std::error_code error;
  if (std::filesystem::equivalent(dir, kFashionMnistDir, error)) return load_fashion_mnist(dir);
  // Each file gzipped or not, as the data set's publisher ships it.
  const auto present = [](const std::string& gzipped) {
    std::error_code missing;
    if (std::filesystem::exists(gzipped, missing)) return gzipped;
    const std::string plain = gzipped.substr(0, gzipped.size() - 3);
    return std::filesystem::exists(plain, missing) ? plain : gzipped;  // the .gz name in the error
  };
  const DatasetFiles gz = fashion_mnist_files(dir);
  const DatasetFiles files{present(gz.train_images), present(gz.train_labels), present(gz.test_images),
                           present(gz.test_labels)};
  std::vector<std::string> class_names;
  const std::string names_path = (std::filesystem::path(dir) / "classes.txt").string();
  if (std::filesystem::exists(names_path, error)) {
    std::istringstream lines(util::read_text_file(names_path));
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) class_names.push_back(line);
    if (class_names.empty()) throw DataError(names_path, "no class names (one per line)");
  }
  return load_idx_dataset(files, std::move(class_names));
}

}  // namespace fplab::models
