// Internal to sim/: a thread's spare buffers, handed from one GEMM to the next. A training step
// makes hundreds of GEMMs of a few shapes, and fresh megabytes for each cost page faults and
// zero-filling (a tenth of an h100-tf32 small_cnn epoch in perf, 6% of an e4m3 one). A buffer
// keeps the largest size it had: its users read only the part they wrote.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace fplab::sim::detail {

constexpr size_t kSpareBuffers = 4;                      // per element type: a GEMM holds at most two at once
constexpr size_t kLargestSpareBytes = size_t{32} << 20;  // larger ones are freed: memory held between GEMMs stays small

template <class T>
std::vector<std::vector<T>>& spare_buffers() {
  thread_local std::vector<std::vector<T>> kept;
  return kept;
}

// A buffer of at least `size` elements (its contents: whatever the last user left).
template <class T>
std::vector<T> take_spare_buffer(size_t size) {
  std::vector<T> buffer;
  if (auto& kept = spare_buffers<T>(); !kept.empty()) {
    buffer = std::move(kept.back());
    kept.pop_back();
  }
  if (buffer.size() < size) buffer.resize(size);
  return buffer;
}

// The buffer kept for the next taker where there is room and it is not too large; else freed.
template <class T>
void give_back_spare_buffer(std::vector<T>& buffer) {
  if (auto& kept = spare_buffers<T>();
      kept.size() < kSpareBuffers && !buffer.empty() && buffer.size() * sizeof(T) <= kLargestSpareBytes)
    kept.push_back(std::move(buffer));
}

// A spare buffer for a scope: taken on construction, given back on destruction.
template <class T>
class ScopedSpareBuffer {
 public:
  explicit ScopedSpareBuffer(size_t size) : buffer_(take_spare_buffer<T>(size)) {}
  ~ScopedSpareBuffer() { give_back_spare_buffer(buffer_); }
  ScopedSpareBuffer(const ScopedSpareBuffer&) = delete;
  ScopedSpareBuffer& operator=(const ScopedSpareBuffer&) = delete;
  T* data() { return buffer_.data(); }

 private:
  std::vector<T> buffer_;
};

}  // namespace fplab::sim::detail
