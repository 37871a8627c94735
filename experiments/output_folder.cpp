#include "experiments/output_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "util/whole_file.hpp"
#include "util/rendered_file.hpp"

namespace fplab::experiments {

const char* const kExperimentMarker = ".fplab-experiment";

namespace {

constexpr const char* kLockPrefix = ".fplab-lock";

bool is_bookkeeping(const std::string& name) { return name == kExperimentMarker || name.rfind(kLockPrefix, 0) == 0; }

std::string read_marker(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  std::string name = text.str();
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  return name;
}

bool holds_replicas(const std::filesystem::path& folder) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder / "replicas", ec))
    if (entry.path().extension() == ".ckpt") return true;
  return false;
}

}  // namespace

OutputFolder::OutputFolder(const std::string& path, const std::string& name, const ClaimOptions& o) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot create the output folder: " + ec.message());
  if (!fs::is_directory(path, ec)) throw std::runtime_error(path + ": is not a folder");

  const std::string lock = (fs::path(path) / (o.ranks > 1 ? std::string(kLockPrefix) + ".rank-" + std::to_string(o.rank)
                                                          : std::string(kLockPrefix)))
                               .string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw std::runtime_error(lock + ": cannot open: " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw std::runtime_error(path +
                             ": another fplab run is writing to this folder; wait for it or choose another --out");
  }
  try {
    claim(name, o);
  } catch (...) {
    // A constructor that throws runs no destructor: a process that goes on (Python's
    // fplab.torch.experiment) must not keep the folder locked.
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

void OutputFolder::claim(const std::string& name, const ClaimOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string& path = path_;
  if (o.rank != 0) return;

  const fs::path marker = fs::path(path) / kExperimentMarker;
  const bool marked = fs::exists(marker, ec);
  const std::string marked_name = marked ? read_marker(marker) : "";
  if (!o.force) {
    if (marked) {
      const std::string& other = marked_name;
      if (other != name)
        throw std::runtime_error(path + ": holds the results of experiment '" + other + "', not '" + name +
                                 "'; choose another --out, or pass --force to write over them");
      if (!o.resume && holds_replicas(path))
        throw std::runtime_error(path +
                                 ": holds results of this experiment already; pass --resume to keep its finished "
                                 "replicas, or --force to train them all again");
    } else if (holds_replicas(path)) {
      // Written before folders were marked: taken as this experiment's only when resuming.
      if (!o.resume)
        throw std::runtime_error(path +
                                 ": holds results of an earlier run; pass --resume to keep the replicas that match "
                                 "this experiment, or --force to write over them");
    } else {
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (!is_bookkeeping(entry.path().filename().string()))
          throw std::runtime_error(path +
                                   ": is not empty and holds no fplab experiment; choose another --out, or pass "
                                   "--force to write into it");
    }
  }
  if (marked_name != name) util::write_file_atomically(marker.string(), name + "\n");
  if (o.resume)
    for (const auto& folder : {fs::path(path), fs::path(path) / "replicas", fs::path(path) / "figures"})
      leftovers_removed_ += util::remove_interrupted_renders(folder.string());
}

OutputFolder::~OutputFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

}  // namespace fplab::experiments
