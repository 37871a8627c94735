// IDX reading and the Fashion-MNIST dataset: the real files of dataset-fashion-mnist load with
// the published shapes and class counts; IDX files written here (plain and gzip) round-trip;
// every malformed file is refused with one line naming the file and the problem.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "models/dataset.hpp"
#include "models/idx.hpp"
#include "tests/data_error.hpp"
#include "tests/temp_dir.hpp"

using namespace fplab::models;
using fplab::test::data_error;
using fplab::test::TempDir;
namespace fs = std::filesystem;

namespace {

// An IDX file's bytes, built here from the format's definition (not by the reader's code).
std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  const auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, int bound = 256) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(g() % bound);
  return v;
}

// One line, starting with the file's path, containing the problem.
void check_message(const std::string& message, const std::string& path, const std::string& problem) {
  INFO(message);
  CHECK(message.rfind(path + ": ", 0) == 0);
  CHECK(message.find(problem) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

// A small data set in the Fashion-MNIST layout (gzip, standard names) in `dir`.
void write_dataset(const TempDir& dir, uint32_t train, uint32_t test, uint32_t rows, uint32_t cols,
                   std::vector<uint8_t> train_labels = {}) {
  if (train_labels.empty()) train_labels = random_bytes(train, 3, 10);
  write_gzip(dir.file("train-images-idx3-ubyte.gz"),
             idx_bytes(0x803, {train, rows, cols}, random_bytes(train * rows * cols, 1)));
  write_gzip(dir.file("train-labels-idx1-ubyte.gz"), idx_bytes(0x801, {train}, train_labels));
  write_gzip(dir.file("t10k-images-idx3-ubyte.gz"),
             idx_bytes(0x803, {test, rows, cols}, random_bytes(test * rows * cols, 2)));
  write_gzip(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x801, {test}, random_bytes(test, 4, 10)));
}

}  // namespace

TEST_CASE("fashion-mnist: the installed files load with 60000/10000 images of 28x28 and 6000/1000 per class") {
  const Dataset d = load_fashion_mnist();
  REQUIRE(d.train.size() == 60000);
  REQUIRE(d.test.size() == 10000);
  for (const ImageSet* set : {&d.train, &d.test}) {
    CHECK(set->channels == 1);
    CHECK(set->rows == 28);
    CHECK(set->cols == 28);
    CHECK(set->images.size() == set->size() * 784);
  }
  std::array<size_t, 10> train_count{}, test_count{};
  for (uint8_t l : d.train.labels) ++train_count.at(l);
  for (uint8_t l : d.test.labels) ++test_count.at(l);
  for (int c = 0; c < 10; ++c) {
    CHECK(train_count[c] == 6000);
    CHECK(test_count[c] == 1000);
  }
  CHECK(d.class_names.size() == 10);
  CHECK(d.class_names[0] == "T-shirt/top");
  CHECK(d.class_names[9] == "Ankle boot");
  // The published statistics of the training pixels.
  CHECK(std::abs(d.normalisation.mean - kFashionMnistMean) < 5e-4);
  CHECK(std::abs(d.normalisation.std - kFashionMnistStd) < 5e-4);
  // So the normalised training pixels have mean 0 and deviation 1.
  double sum = 0, sum_squares = 0;
  for (float x : d.train.images) {
    sum += x;
    sum_squares += double{x} * x;
  }
  const double n = static_cast<double>(d.train.images.size());
  CHECK(std::abs(sum / n) < 1e-5);
  CHECK(std::abs(std::sqrt(sum_squares / n - (sum / n) * (sum / n)) - 1) < 1e-5);
  // Background pixels (0) are the minimum and what padding uses.
  CHECK(*std::min_element(d.train.images.begin(), d.train.images.end()) == d.background());
}

TEST_CASE("idx: the installed training images read raw as 60000 x 28 x 28 unsigned bytes") {
  const IdxArray a = read_idx(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
  CHECK(a.dims == std::vector<uint32_t>{60000, 28, 28});
  CHECK(a.magic() == kIdxImagesMagic);
  CHECK(a.data.size() == 47040000);
}

TEST_CASE("idx: plain and gzip files written here round-trip, 1 to 4 dimensions") {
  TempDir dir;
  const std::vector<std::vector<uint32_t>> shapes = {{7}, {5, 3}, {4, 3, 5}, {2, 3, 4, 5}, {0, 28, 28}};
  for (size_t s = 0; s < shapes.size(); ++s) {
    size_t n = 1;
    for (uint32_t d : shapes[s]) n *= d;
    const auto data = random_bytes(n, static_cast<uint32_t>(s));
    const auto bytes = idx_bytes(0x800 | static_cast<uint32_t>(shapes[s].size()), shapes[s], data);
    for (bool gzip : {false, true}) {
      std::string name = "shape" + std::to_string(s);
      if (gzip) name += ".gz";
      const std::string path = dir.file(name);
      gzip ? write_gzip(path, bytes) : write_plain(path, bytes);
      const IdxArray a = read_idx(path);
      CHECK(a.dims == shapes[s]);
      CHECK(a.data == data);
    }
  }
}

TEST_CASE("idx: every malformed file is refused with one line naming the file and the problem") {
  TempDir dir;
  const auto pixels = random_bytes(60, 9);
  const auto images = idx_bytes(0x803, {5, 3, 4}, pixels);
  const auto read_images = [](const std::string& p) { return [p] { read_idx(p, kIdxImagesMagic, "pixels"); }; };

  SECTION("truncated data, plain and gzip") {
    for (bool gzip : {false, true}) {
      const std::string path = dir.file(gzip ? "cut.gz" : "cut");
      const std::vector<uint8_t> cut(images.begin(), images.end() - 10);
      gzip ? write_gzip(path, cut) : write_plain(path, cut);
      check_message(data_error(read_images(path)), path, "truncated: expected 60 bytes of pixels, got 50");
    }
  }
  SECTION("truncated header and empty file") {
    const std::string path = dir.file("short");
    write_plain(path, {images.begin(), images.begin() + 10});
    check_message(data_error(read_images(path)), path, "truncated: the header needs 16 bytes, got 10");
    write_plain(path, {});
    check_message(data_error(read_images(path)), path,
                  "truncated: an IDX file starts with a 4-byte magic number, got 0");
  }
  SECTION("gzip stream cut short") {
    const std::string path = dir.file("stream.gz");
    write_gzip(path, images);
    const auto size = fs::file_size(path);
    fs::resize_file(path, size - 12);  // into the compressed data, past the 8-byte trailer
    check_message(data_error(read_images(path)), path, "truncated");
  }
  SECTION("gzip data with a flipped byte") {
    const std::string path = dir.file("flipped.gz");
    write_gzip(path, idx_bytes(0x803, {50, 3, 4}, random_bytes(600, 5)));
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(path) / 2));
    char c;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
    f.close();
    // Either zlib sees it (bad code, bad CRC) or the sizes no longer match.
    const std::string message = data_error(read_images(path));
    INFO(message);
    CHECK((message.find("corrupt gzip data") != std::string::npos || message.find("truncated") != std::string::npos ||
           message.find("trailing") != std::string::npos));
    check_message(message, path, "");
  }
  SECTION("wrong magic: a labels file where images are expected, and not IDX at all") {
    const std::string path = dir.file("labels");
    write_plain(path, idx_bytes(0x801, {5}, random_bytes(5, 1, 10)));
    check_message(data_error(read_images(path)), path, "wrong magic 0x00000801, expected 0x00000803");
    write_plain(path, idx_bytes(0x12345678, {}, {}));
    check_message(data_error(read_images(path)), path, "not an IDX file: magic 0x12345678");
  }
  SECTION("an element type other than unsigned byte") {
    const std::string path = dir.file("float");
    write_plain(path, idx_bytes(0x0D03, {1, 1, 1}, {0, 0, 0, 0}));
    check_message(data_error(read_images(path)), path, "unsupported element type 0x0D (float32)");
  }
  SECTION("wrong dimension counts") {
    const std::string path = dir.file("dims");
    write_plain(path, idx_bytes(0x800, {}, {}));
    check_message(data_error([&] { read_idx(path); }), path, "bad dimension count 0");
    write_plain(path, idx_bytes(0x805, {1, 1, 1, 1, 1}, {7}));
    check_message(data_error([&] { read_idx(path); }), path, "bad dimension count 5");
    write_plain(path, idx_bytes(0x802, {5, 12}, pixels));
    check_message(data_error(read_images(path)), path, "wrong magic 0x00000802, expected 0x00000803");
  }
  SECTION("dimensions whose product overflows or is too large are refused before any data is read") {
    const std::string path = dir.file("huge");
    write_plain(path, idx_bytes(0x804, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 2}, {1, 2, 3}));
    check_message(data_error([&] { read_idx(path); }), path, "the header promises more than 4294967296 bytes");
    write_plain(path, idx_bytes(0x803, {70000, 280, 280}, {1, 2, 3}));
    check_message(data_error([&] { read_idx(path); }), path, "the header promises more than 4294967296 bytes");
  }
  SECTION("a gzip that expands far past what its header promises is read only as far as the header says") {
    // 64 MiB of zeros after a 10-byte array: the old reader decompressed all of it first.
    const std::string path = dir.file("bomb.gz");
    auto bytes = idx_bytes(0x801, {10}, std::vector<uint8_t>(10, 1));
    bytes.resize(bytes.size() + (size_t{64} << 20), 0);
    write_gzip(path, bytes);
    check_message(data_error([&] { read_idx(path); }), path,
                  "trailing garbage: more than 65536 bytes after the 10 bytes");
  }
  SECTION("a FIFO is refused at once instead of waiting for a writer") {
    const std::string path = dir.file("fifo");
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    check_message(data_error([&] { read_idx(path); }), path, "not a regular file");
  }
  SECTION("trailing bytes") {
    for (bool gzip : {false, true}) {
      const std::string path = dir.file(gzip ? "long.gz" : "long");
      auto longer = images;
      longer.insert(longer.end(), {1, 2, 3});
      gzip ? write_gzip(path, longer) : write_plain(path, longer);
      check_message(data_error(read_images(path)), path, "trailing garbage: 3 bytes after the 60 bytes of pixels");
    }
  }
  SECTION("a missing file names the package that provides it") {
    const std::string path = dir.file("absent.gz");
    check_message(data_error([&] { read_idx(path); }), path,
                  "cannot open (is the dataset-fashion-mnist package installed? scripts/setup installs it)");
    const std::string missing_dir = dir.file("nowhere");
    check_message(data_error([&] { load_fashion_mnist(missing_dir); }), missing_dir + "/train-images-idx3-ubyte.gz",
                  "cannot open (is the dataset-fashion-mnist package installed?");
  }
  SECTION("a folder where a file is expected") {
    check_message(data_error([&] { read_idx(dir.path.string()); }), dir.path.string(), "not a regular file");
  }
}

TEST_CASE("dataset: label and shape problems are refused naming the file") {
  TempDir dir;
  const DatasetFiles files = fashion_mnist_files(dir.path.string());
  SECTION("a label of 10 where ten classes are named") {
    std::vector<uint8_t> labels = random_bytes(20, 3, 10);
    labels[13] = 10;
    write_dataset(dir, 20, 5, 28, 28, labels);
    const std::vector<std::string> names(10, "class");
    check_message(data_error([&] { load_idx_dataset(files, names); }), files.train_labels,
                  "label 10 of example 13 is not a class (0..9)");
    // Unnamed, the classes are 0 to the largest label.
    CHECK(load_idx_dataset(files).class_names.size() == 11);
  }
  SECTION("one class only") {
    write_dataset(dir, 20, 5, 28, 28, std::vector<uint8_t>(20, 0));
    write_gzip(files.test_labels, idx_bytes(0x801, {5}, std::vector<uint8_t>(5, 0)));
    check_message(data_error([&] { load_idx_dataset(files); }), files.train_labels, "fewer than two classes");
  }
  SECTION("more images than labels") {
    write_dataset(dir, 20, 5, 28, 28);
    write_gzip(files.test_labels, idx_bytes(0x801, {4}, {1, 2, 3, 4}));
    check_message(data_error([&] { load_idx_dataset(files); }), files.test_labels,
                  "4 labels, but " + files.test_images + " has 5 images");
  }
  SECTION("test images of another size than the training images") {
    write_dataset(dir, 20, 5, 28, 28);
    write_gzip(files.test_images, idx_bytes(0x803, {5, 27, 28}, random_bytes(5 * 27 * 28, 1)));
    check_message(data_error([&] { load_idx_dataset(files); }), files.test_images,
                  "images are 27x28, but the training images");
  }
  SECTION("fashion-mnist insists on its published shapes") {
    write_dataset(dir, 20, 5, 28, 28);
    CHECK_NOTHROW(load_idx_dataset(files));
    check_message(data_error([&] { load_fashion_mnist(dir.path.string()); }), files.train_images,
                  "20 images, the Fashion-MNIST training set has 60000");
    write_dataset(dir, 20, 5, 32, 32);
    check_message(data_error([&] { load_fashion_mnist(dir.path.string()); }), files.train_images,
                  "images are 32x32, Fashion-MNIST's are 28x28");
  }
}

TEST_CASE("dataset: pixels are normalised by the exact statistics of the training pixels only") {
  TempDir dir;
  write_dataset(dir, 30, 7, 6, 5);
  const Dataset d = load_idx_dataset(fashion_mnist_files(dir.path.string()));
  const IdxArray train = read_idx(dir.file("train-images-idx3-ubyte.gz"));
  const IdxArray test = read_idx(dir.file("t10k-images-idx3-ubyte.gz"));
  // Two-pass statistics in long double: an independent route to the same numbers.
  long double sum = 0;
  for (uint8_t x : train.data) sum += x / 255.0L;
  const long double mean = sum / train.data.size();
  long double squares = 0;
  for (uint8_t x : train.data) squares += (x / 255.0L - mean) * (x / 255.0L - mean);
  const long double sd = std::sqrt(squares / train.data.size());
  CHECK(std::abs(d.normalisation.mean - static_cast<double>(mean)) < 1e-14);
  CHECK(std::abs(d.normalisation.std - static_cast<double>(sd)) < 1e-14);
  REQUIRE(d.train.rows == 6);
  REQUIRE(d.train.cols == 5);
  REQUIRE(d.test.size() == 7);
  size_t wrong = 0;
  for (size_t i = 0; i < train.data.size(); ++i)
    wrong +=
        d.train.images[i] != static_cast<float>((train.data[i] / 255.0 - d.normalisation.mean) / d.normalisation.std);
  for (size_t i = 0; i < test.data.size(); ++i)
    wrong +=
        d.test.images[i] != static_cast<float>((test.data[i] / 255.0 - d.normalisation.mean) / d.normalisation.std);
  CHECK(wrong == 0);
  CHECK(d.class_names == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
}

TEST_CASE("dataset: a folder of your own, plain or gzipped, with or without classes.txt") {
  TempDir dir;
  // Three classes of 8x8 images, the files not compressed (as some publishers ship them).
  const std::vector<uint8_t> train_labels = random_bytes(30, 3, 3), test_labels = random_bytes(9, 4, 3);
  write_plain(dir.file("train-images-idx3-ubyte"), idx_bytes(0x803, {30, 8, 8}, random_bytes(30 * 64, 1)));
  write_plain(dir.file("train-labels-idx1-ubyte"), idx_bytes(0x801, {30}, train_labels));
  write_plain(dir.file("t10k-images-idx3-ubyte"), idx_bytes(0x803, {9, 8, 8}, random_bytes(9 * 64, 2)));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(0x801, {9}, test_labels));
  const Dataset numbered = load_image_dataset(dir.path.string());
  CHECK(numbered.class_names == std::vector<std::string>{"0", "1", "2"});
  CHECK(numbered.train.classes == 3);
  CHECK(numbered.test.classes == 3);
  CHECK(numbered.train.rows == 8);
  CHECK(numbered.train.labels == train_labels);
  CHECK(numbered.test.labels == test_labels);
  dir.write("classes.txt", "circle\nsquare\ntriangle\n");
  CHECK(load_image_dataset(dir.path.string()).class_names == std::vector<std::string>{"circle", "square", "triangle"});
  dir.write("classes.txt", "circle\nsquare\n");  // fewer names than classes
  check_message(data_error([&] { load_image_dataset(dir.path.string()); }), dir.file("train-labels-idx1-ubyte"),
                "is not a class (0..1)");
  // A missing file is named with the .gz name the folder was searched for first.
  const std::string missing = (dir.path / "absent").string();
  check_message(data_error([&] { load_image_dataset(missing); }), missing + "/train-images-idx3-ubyte.gz",
                "cannot open");
}
