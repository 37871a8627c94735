// The output folder of one `fplab run`, claimed for the run's whole life: a lock, so that two
// runs can never write into one folder at once, and a marker naming the experiment, so that a
// run never mixes its results with another experiment's or silently writes over finished ones.
#pragma once

#include <string>

namespace fplab::experiments {

struct ClaimOptions {
  bool resume = false;      // keep this experiment's finished replicas
  bool force = false;       // write into the folder whatever it holds
  int rank = 0, ranks = 1;  // under mpirun every rank locks its own file; rank 0 claims the folder
};

class OutputFolder {
 public:
  // Creates `path` if needed and claims it for experiment `name`. Refuses (std::runtime_error, one
  // line saying what to do) when another process holds it, when it holds another experiment's
  // results or files that are no experiment's (unless force), or this experiment's results
  // without resume (unless force). With resume, removes the temporary files an interrupted run
  // left (half-written replicas or figures). Under mpirun only rank 0 checks and marks its folder
  // (the others train only once rank 0 has claimed it, fplab run's agreement); the other ranks
  // lock theirs, which may be the same folder or one on another machine.
  OutputFolder(const std::string& path, const std::string& name, const ClaimOptions& options);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::string& path() const { return path_; }
  size_t leftovers_removed() const { return leftovers_removed_; }

 private:
  // After the lock: the marker checked and written, leftovers removed.
  void claim(const std::string& name, const ClaimOptions& options);

  std::string path_;
  int lock_fd_ = -1;
  size_t leftovers_removed_ = 0;
};

// The marker's file name inside the folder (".fplab-experiment"): it holds the experiment's name.
extern const char* const kExperimentMarker;

}  // namespace fplab::experiments
