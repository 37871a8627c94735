// The bootstrap over replicas. The replicas of a group are the independent units of an
// experiment (each one is a whole training run); the test examples are the same fixed test set for
// every replica, and the pairwise metrics (churn, L2) share replicas between pairs, so neither the
// examples nor the pairs may be resampled as if independent. A resample draws n replicas from the
// group's n with replacement and recomputes the statistic on what was drawn; the interval is the
// 2.5% and 97.5% quantiles of that bootstrap distribution (the percentile interval).
//
// With few replicas the distribution is enumerated exactly: every multiset of n draws (there are
// C(2n-1, n): 35 for 4 replicas, 92 378 for 10) with its multinomial probability, so the interval
// needs no seed at all. Beyond `resamples` multisets it is estimated from `resamples` seeded
// draws (deterministic for a given seed).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace fplab::experiments {

struct Interval {
  double low = 0, high = 0;
};

class ReplicaBootstrap {
 public:
  static constexpr double kLevel = 0.95;

  explicit ReplicaBootstrap(size_t replicas, size_t resamples = 100000, uint64_t seed = 1);

  size_t replicas() const { return replicas_; }
  bool exact() const { return exact_; }
  size_t resamples() const { return weights_.size(); }  // distinct multisets when exact()

  // A statistic of one resample, given how many times each replica was drawn (counts sum to
  // replicas()); nullopt where it is undefined (e.g. a pair statistic when one replica was drawn
  // every time): such resamples are left out and the others' probabilities renormalised.
  using Statistic = std::function<std::optional<double>(std::span<const uint32_t> counts)>;
  // The kLevel percentile interval: the smallest values whose bootstrap distribution function
  // reaches (1 - kLevel)/2 and (1 + kLevel)/2. {0, 0} when every resample was left out.
  Interval interval(const Statistic& statistic) const;

 private:
  size_t replicas_;
  bool exact_ = false;
  std::vector<uint32_t> counts_;  // resamples() rows of replicas() counts
  std::vector<double> weights_;   // each resample's probability
};

// A symmetric matrix of a pairwise metric: d[i][j] for replicas i != j (the diagonal is unused).
using PairMatrix = std::vector<std::vector<double>>;

// The mean of d over the pairs of draws that hold two different replicas: a replica drawn twice is
// the same training run, and its "pair" with itself (churn 0, L2 0 by construction) measures
// nothing, so such pairs are left out. Replicas i and j drawn c_i and c_j times make c_i * c_j
// pairs. nullopt when fewer than two different replicas were drawn.
std::optional<double> resampled_pair_mean(const PairMatrix& d, std::span<const uint32_t> counts);

// The sample standard deviation (n - 1) of the drawn values, value i repeated counts[i] times.
// nullopt when fewer than two different replicas were drawn: one run drawn n times says nothing
// about the spread between runs (its sd of 0 would drag the interval's low end to 0 whenever
// that happens in over 2.5% of resamples, as it does for 3 replicas: 3 in 27).
std::optional<double> resampled_stddev(std::span<const double> values, std::span<const uint32_t> counts);

}  // namespace fplab::experiments
