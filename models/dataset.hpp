// Image-classification data sets read from IDX files: Fashion-MNIST (Xiao, Rasul, Vollgraf 2017)
// from the Debian package dataset-fashion-mnist (60 000 training and 10 000 test images of 28x28
// grey pixels, labels 0..9), or any other set of grey images in the same four files (MNIST, a
// set of your own, of any size and up to 256 classes). Nothing is downloaded.
//
// Images are stored normalised, (x/255 - mean) / std as float, N x 1 x 28 x 28 row-major. mean
// and std are computed exactly (integer sums) from the *training* pixels of the files loaded,
// so they never depend on a subset or a seed; for Fashion-MNIST they are 0.2860 and 0.3530.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/data_error.hpp"

namespace fplab::models {

inline constexpr int kFashionMnistClasses = 10;
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr size_t kFashionMnistTrainSize = 60000;
inline constexpr size_t kFashionMnistTestSize = 10000;
inline constexpr int kFashionMnistSide = 28;
// Published statistics of the training pixels (scaled to [0, 1]), for checks only.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
inline const std::array<std::string, kFashionMnistClasses> kFashionMnistClassNames = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

// One split: images N x channels x rows x cols (normalised), one label per image.
struct ImageSet {
  int channels = 1, rows = 0, cols = 0;
  std::vector<float> images;
  std::vector<uint8_t> labels;  // each < classes
  size_t classes = kFashionMnistClasses;  // of the data set (both splits): the model's outputs

  size_t size() const { return labels.size(); }
  size_t image_size() const { return static_cast<size_t>(channels) * rows * cols; }
  const float* image(size_t i) const { return images.data() + i * image_size(); }
};

// x in 0..255 -> (x/255 - mean) / std, rounded once to float.
struct Normalisation {
  double mean = 0, std = 1;  // of the pixels scaled to [0, 1]
  float apply(uint8_t pixel) const { return static_cast<float>((pixel / 255.0 - mean) / std); }
};

struct Dataset {
  ImageSet train, test;
  Normalisation normalisation;  // from the training pixels
  std::vector<std::string> class_names;
  // The normalised value of a black (0) pixel: the padding a random crop adds, as
  // torchvision's RandomCrop(padding) does before normalising.
  float background() const { return normalisation.apply(0); }
};

struct DatasetFiles {
  std::string train_images, train_labels, test_images, test_labels;
};
// The four standard names (train-images-idx3-ubyte.gz, ...) in `dir`.
DatasetFiles fashion_mnist_files(const std::string& dir);

// Any IDX image/label pair of files: the images of both splits must have the same size, every
// image a label. Sizes are not fixed (small synthetic sets load too). The classes are the names
// given (every label must be below their count), or else 0..L where L is the largest label of
// either split.
Dataset load_idx_dataset(const DatasetFiles& files, std::vector<std::string> class_names = {});

// The data set in folder `dir`, as `fplab train/run/diverge --data-dir` read it: the four files
// under their standard names, each gzipped (name.gz) or not; the class names from dir/classes.txt
// (one per line) when it exists, Fashion-MNIST's for the Debian package's folder, else the label
// numbers. The Debian package's folder also gets Fashion-MNIST's shape checks.
Dataset load_image_dataset(const std::string& dir = kFashionMnistDir);

// Fashion-MNIST: load_idx_dataset plus the published shapes (60000 / 10000 images of 28x28).
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDir);

// Exact statistics of the pixels (scaled to [0, 1]): population mean and standard deviation.
Normalisation pixel_statistics(const std::vector<uint8_t>& pixels);

}  // namespace fplab::models
