// How the ranks of a distributed `fplab run` meet: every rank trains its share of the replicas
// on its own machine (and into its own output folder), then sends them to rank 0 as bytes; rank 0
// writes the one report. Nothing is read from another rank's folder, so the ranks need no shared
// file system. The MPI implementation is experiments/mpi_exchange; tests use an in-process one.
#pragma once

#include <cstdint>
#include <vector>

namespace fplab::experiments {

class ReplicaExchange {
 public:
  virtual ~ReplicaExchange() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // Collective: every rank says whether it failed; returns the lowest failed rank, or -1 when
  // none did. A rank that fails must still call it, or the others wait for ever.
  virtual int first_failed(bool failed) = 0;
  // Collective: rank 0 receives every rank's bytes, in rank order (its own first); the other
  // ranks receive nothing.
  virtual std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) = 0;
};

}  // namespace fplab::experiments
