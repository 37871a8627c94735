#include "experiments/mpi_exchange.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <stdexcept>

namespace fplab::experiments {
namespace {

constexpr int kSizeTag = 1, kBytesTag = 2;
// MPI counts are ints: a message larger than this goes in pieces.
constexpr size_t kPiece = size_t{1} << 30;

}  // namespace

MpiExchange::MpiExchange() {
  int provided = 0;
  // Only the main thread calls MPI; the training threads never do.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
}

MpiExchange::~MpiExchange() { MPI_Finalize(); }

int MpiExchange::first_failed(bool failed) {
  int mine = failed ? rank_ : INT_MAX, lowest = INT_MAX;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return lowest == INT_MAX ? -1 : lowest;
}

std::vector<std::vector<uint8_t>> MpiExchange::gather(const std::vector<uint8_t>& mine) {
  if (rank_ != 0) {
    const uint64_t size = mine.size();
    MPI_Send(&size, 1, MPI_UINT64_T, 0, kSizeTag, MPI_COMM_WORLD);
    for (size_t at = 0; at < mine.size(); at += kPiece)
      MPI_Send(mine.data() + at, static_cast<int>(std::min(kPiece, mine.size() - at)), MPI_BYTE, 0, kBytesTag,
               MPI_COMM_WORLD);
    return {};
  }
  std::vector<std::vector<uint8_t>> all(static_cast<size_t>(ranks_));
  all[0] = mine;
  for (int r = 1; r < ranks_; ++r) {
    uint64_t size = 0;
    MPI_Recv(&size, 1, MPI_UINT64_T, r, kSizeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    auto& bytes = all[static_cast<size_t>(r)];
    bytes.resize(size);
    for (size_t at = 0; at < bytes.size(); at += kPiece)
      MPI_Recv(bytes.data() + at, static_cast<int>(std::min(kPiece, bytes.size() - at)), MPI_BYTE, r, kBytesTag,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return all;
}

}  // namespace fplab::experiments
