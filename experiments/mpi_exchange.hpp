// The ranks of an `mpirun fplab run` meeting through MPI (Open MPI: Debian's libopenmpi-dev).
// Built where CMake finds MPI (the library fplab::experiments_mpi); `fplab run` makes one only
// when an MPI launcher started it, so a plain run never initialises MPI.
#pragma once

#include "experiments/replica_exchange.hpp"

namespace fplab::experiments {

class MpiExchange final : public ReplicaExchange {
 public:
  MpiExchange();            // MPI_Init: one per process
  ~MpiExchange() override;  // MPI_Finalize
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  int first_failed(bool failed) override;
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) override;

 private:
  int rank_ = 0, ranks_ = 1;
};

}  // namespace fplab::experiments
