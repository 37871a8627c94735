#include "experiments/runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "experiments/replica_file.hpp"
#include "util/progress.hpp"

namespace fplab::experiments {
namespace {

struct Job {
  std::string profile;
  Variant variant;
  size_t replica;
};

std::string replica_path(const std::string& out, const Job& j) {
  return experiments::replica_path(out, j.profile, j.variant, j.replica);
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(seconds);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

}  // namespace

std::pair<int, int> launcher_rank() {
  for (auto [rank, size] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}}) {
    const char* r = std::getenv(rank);
    const char* s = std::getenv(size);
    if (r && s) return {std::atoi(r), std::max(1, std::atoi(s))};
  }
  return {0, 1};
}

std::vector<ReplicaRecord> run_experiment(const Experiment& x, const models::Dataset& data,
                                          const ProfileResolver& resolve, const RunOptions& o) {
  std::filesystem::create_directories(o.out_dir + "/replicas");
  std::map<std::string, std::pair<profiles::OpTable, profiles::OpTable>> tables;
  for (const auto& p : x.profiles) tables.emplace(p, resolve(p));
  std::vector<Job> jobs;
  for (const auto& p : x.profiles)
    for (Variant v : x.variants)
      for (size_t i = 0; i < x.replicas; ++i) jobs.push_back({p, v, i});
  auto config_of = [&](const Job& j) {
    const auto& [default_ops, deterministic_ops] = tables.at(j.profile);
    return x.replica_config(default_ops, deterministic_ops, j.variant, j.replica);
  };

  std::vector<ReplicaRecord> records(jobs.size());
  std::vector<char> mine(jobs.size(), 0);
  for (size_t k = 0; k < jobs.size(); ++k) mine[k] = static_cast<int>(k % static_cast<size_t>(o.ranks)) == o.rank;
  std::atomic<size_t> next{0}, done{0};
  std::mutex print;
  std::exception_ptr failure;
  size_t to_do = 0, reused = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!mine[k]) continue;
    ++to_do;
    if (o.resume &&
        load_replica(replica_path(o.out_dir, jobs[k]), replica_fingerprint(config_of(jobs[k])), records[k])) {
      mine[k] = 2;  // finished in an earlier run
      ++reused;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  // Replicas finish minutes apart: no delay before the first line.
  util::Progress progress(!o.quiet, 10, 0);
  if (!o.quiet && reused) std::fprintf(stderr, "resuming: %zu of %zu replicas already finished\n", reused, to_do);
  auto worker = [&] {
    for (;;) {
      const size_t k = next++;
      if (k >= jobs.size()) return;
      if (mine[k] != 1) continue;
      try {
        const Job& j = jobs[k];
        const models::TrainConfig c = config_of(j);
        const auto t0 = std::chrono::steady_clock::now();
        const auto result = models::train(c, data);
        ReplicaRecord& r = records[k];
        r.algo_seed = c.algo_seed;
        r.impl_seed = c.impl_seed;
        r.test_accuracy = result.test_accuracy;
        r.train_loss = result.train_loss;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.weights_sha256 = result.weights_sha256;
        r.predictions_sha256 = result.predictions_sha256;
        r.predictions = result.predictions;
        r.weights = result.weights;
        r.buffers = result.buffers;
        save_replica(replica_path(o.out_dir, j), r, replica_fingerprint(c));
        const size_t finished = ++done + reused;
        if (!o.quiet) {
          const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          const double left = elapsed / static_cast<double>(done) * static_cast<double>(to_do - finished);
          const int bar = static_cast<int>(30 * finished / to_do);
          char line[256];
          std::snprintf(line, sizeof line, "[%s%s] %zu/%zu replicas  %s %s #%zu: %.2f%%  %s elapsed, ~%s left",
                        std::string(bar, '=').c_str(), std::string(30 - bar, ' ').c_str(), finished, to_do,
                        j.profile.c_str(), variant_name(j.variant).c_str(), j.replica, 100 * r.test_accuracy,
                        clock_text(elapsed).c_str(), clock_text(left).c_str());
          progress.update(line);
        }
      } catch (...) {
        std::lock_guard lock(print);
        if (!failure) failure = std::current_exception();
        next = jobs.size();  // stop handing out work
        return;
      }
    }
  };
  // No more threads than replicas to train; if the system refuses a thread, the ones started
  // stop taking work and are joined before the error is reported (never a joinable thread left).
  const size_t wanted = std::clamp<size_t>(o.jobs, 1, std::max<size_t>(1, to_do - reused));
  std::vector<std::thread> threads;
  std::string refused;
  for (size_t t = 0; t < wanted; ++t) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error& e) {
      refused = e.what();
      next = jobs.size();
      break;
    }
  }
  for (auto& t : threads) t.join();
  if (!refused.empty())
    throw std::runtime_error("cannot start " + std::to_string(wanted) + " threads (" + refused +
                             "); try a smaller --jobs");
  if (failure) std::rethrow_exception(failure);
  progress.finish();

  if (o.ranks > 1) {
    if (o.rank != 0) {
      std::vector<ReplicaRecord> own;
      for (size_t k = 0; k < jobs.size(); ++k)
        if (mine[k]) own.push_back(records[k]);
      return own;
    }
    // Rank 0 collects the other ranks' replicas from the shared output folder.
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (mine[k]) continue;
      const auto path = replica_path(o.out_dir, jobs[k]);
      const auto wait_started = std::chrono::steady_clock::now();
      while (!load_replica(path, replica_fingerprint(config_of(jobs[k])), records[k])) {
        if (std::chrono::steady_clock::now() - wait_started > std::chrono::hours(48))
          throw std::runtime_error(path + ": another rank never wrote this replica");
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }
  for (size_t k = 0; k < jobs.size(); ++k) {
    records[k].profile = jobs[k].profile;
    records[k].variant = jobs[k].variant;
    records[k].replica = jobs[k].replica;
  }
  return records;
}

}  // namespace fplab::experiments
