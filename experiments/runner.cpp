#include "experiments/runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "experiments/replica_file.hpp"
#include "util/progress.hpp"
#include "util/whole_file.hpp"

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

// A rank's replicas as one message: for each, its job index and its replica file's bytes.
std::vector<uint8_t> pack_replicas(const std::vector<size_t>& jobs, const std::vector<std::vector<uint8_t>>& files) {
  std::vector<uint8_t> out;
  auto put = [&](uint64_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    put(jobs[i]);
    put(files[i].size());
    out.insert(out.end(), files[i].begin(), files[i].end());
  }
  return out;
}

std::vector<std::pair<size_t, std::span<const uint8_t>>> unpack_replicas(std::span<const uint8_t> message, int rank) {
  std::vector<std::pair<size_t, std::span<const uint8_t>>> out;
  auto get = [&](size_t& at) {
    if (message.size() - at < sizeof(uint64_t))
      throw std::runtime_error("rank " + std::to_string(rank) + " sent a truncated message");
    uint64_t v;
    std::memcpy(&v, message.data() + at, sizeof v);
    at += sizeof v;
    return v;
  };
  for (size_t at = 0; at < message.size();) {
    const uint64_t job = get(at), size = get(at);
    if (message.size() - at < size)
      throw std::runtime_error("rank " + std::to_string(rank) + " sent a truncated message");
    out.emplace_back(static_cast<size_t>(job), message.subspan(at, size));
    at += size;
  }
  return out;
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(seconds);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

// This rank's share: its replicas trained (or, resuming, read back) into records; mine[k] is 1
// for a replica trained now, 2 for one an earlier run finished, 0 for another rank's.
template <class ConfigOf>
void train_share(const Experiment& x, const models::Dataset& data, const ProfileResolver& resolve, const RunOptions& o,
                 const std::vector<Job>& jobs,
                 std::map<std::string, std::pair<profiles::OpTable, profiles::OpTable>>& tables,
                 const ConfigOf& config_of, std::vector<ReplicaRecord>& records, std::vector<char>& mine) {
  std::filesystem::create_directories(o.out_dir + "/replicas");
  for (const auto& p : x.profiles) tables.emplace(p, resolve(p));
  std::atomic<size_t> next{0}, done{0};
  std::mutex print;
  std::exception_ptr failure;
  size_t to_do = 0, reused = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!mine[k]) continue;
    ++to_do;
    if (o.resume && load_replica(replica_path(o.out_dir, jobs[k]),
                                 replica_fingerprint(config_of(jobs[k]), o.replica_source), records[k])) {
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
        models::TrainConfig c = config_of(j);
        std::unique_ptr<models::ComputeBackend> backend;
        if (o.backend) c.backend = (backend = o.backend(c.ops)).get();
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
        save_replica(replica_path(o.out_dir, j), r, replica_fingerprint(c, o.replica_source));
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
}

}  // namespace

bool under_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

std::vector<ReplicaRecord> run_experiment(const Experiment& x, const models::Dataset& data,
                                          const ProfileResolver& resolve, const RunOptions& o) {
  std::map<std::string, std::pair<profiles::OpTable, profiles::OpTable>> tables;
  std::vector<Job> jobs;
  for (const auto& p : x.profiles)
    for (Variant v : x.variants)
      for (size_t i = 0; i < x.replicas; ++i) jobs.push_back({p, v, i});
  auto config_of = [&](const Job& j) {
    const auto& [default_ops, deterministic_ops] = tables.at(j.profile);
    return x.replica_config(default_ops, deterministic_ops, j.variant, j.replica);
  };
  std::vector<ReplicaRecord> records(jobs.size());
  for (size_t k = 0; k < jobs.size(); ++k) {
    records[k].profile = jobs[k].profile;
    records[k].variant = jobs[k].variant;
    records[k].replica = jobs[k].replica;
  }
  const int rank = o.exchange ? o.exchange->rank() : 0, ranks = o.exchange ? o.exchange->ranks() : 1;
  auto rank_of = [&](size_t k) { return static_cast<int>(k % static_cast<size_t>(ranks)); };
  std::vector<char> mine(jobs.size(), 0);
  for (size_t k = 0; k < jobs.size(); ++k) mine[k] = rank_of(k) == rank;
  // What fails on this rank is kept until every rank has said whether it failed (below).
  std::exception_ptr failure;
  try {
    train_share(x, data, resolve, o, jobs, tables, config_of, records, mine);
  } catch (...) {
    failure = std::current_exception();
  }
  if (ranks > 1) {
    // Every rank learns whether another failed, so that none waits for bytes that never come.
    const int failed = o.exchange->first_failed(failure != nullptr);
    if (!failure && failed >= 0)
      throw std::runtime_error("rank " + std::to_string(failed) + " of the run failed (its error is above)");
  }
  if (failure) std::rethrow_exception(failure);

  if (ranks > 1) {
    std::vector<size_t> own;
    for (size_t k = 0; k < jobs.size(); ++k)
      if (mine[k]) own.push_back(k);
    std::vector<std::vector<uint8_t>> replicas;
    for (size_t k : own)
      replicas.push_back(replica_bytes(records[k], replica_fingerprint(config_of(jobs[k]), o.replica_source)));
    const auto received = o.exchange->gather(pack_replicas(own, replicas));
    if (rank != 0) {
      std::vector<ReplicaRecord> out;
      for (size_t k : own) out.push_back(std::move(records[k]));
      return out;
    }
    // Rank 0 takes the others' replicas as sent, checks that each was trained under this
    // experiment's recipe, and keeps a copy in its folder (a resumed run then finds them).
    std::vector<char> have(mine.begin(), mine.end());
    for (int r = 1; r < ranks; ++r) {
      for (const auto& [k, bytes] : unpack_replicas(received[static_cast<size_t>(r)], r)) {
        if (k >= jobs.size() || rank_of(k) != r || have[k])
          throw std::runtime_error("rank " + std::to_string(r) + " sent replica " + std::to_string(k) +
                                   ", which is not its share of this experiment (is every rank running the same "
                                   "experiment file?)");
        const auto fingerprint = replica_fingerprint(config_of(jobs[k]), o.replica_source);
        const std::string source = "replica " + std::to_string(k) + " from rank " + std::to_string(r);
        if (!replica_from_bytes(bytes, source, fingerprint, records[k]))
          throw std::runtime_error(source +
                                   " was trained under another recipe (is every rank running the same "
                                   "experiment file and fplab version?)");
        util::write_file_atomically(replica_path(o.out_dir, jobs[k]), bytes);  // the same bytes, if shared
        have[k] = 1;
      }
    }
    for (size_t k = 0; k < jobs.size(); ++k)
      if (!have[k])
        throw std::runtime_error("rank " + std::to_string(rank_of(k)) + " sent no replica " + std::to_string(k));
  }
  return records;
}

}  // namespace fplab::experiments
