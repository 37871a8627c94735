#include "reveal/probe_sum.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <pthread.h>
#include <random>
#include <string>
#include <vector>

namespace fplab::reveal {
namespace {

class Prober {
 public:
  Prober(const SumFunction& sum, size_t n) : sum_(sum), n_(n), x_(n, 1.0f), big_(absorbing_value(n)) {}

  // Terms in the subtree where i and j first meet.
  size_t meet_size(size_t i, size_t j) {
    const auto key = std::minmax(i, j);
    if (const auto found = cache_.find(key); found != cache_.end()) return found->second;
    x_[i] = big_;
    x_[j] = -big_;
    const float r = sum_(x_);
    ++calls_;
    x_[i] = x_[j] = 1.0f;
    if (!(r >= 0) || r > static_cast<float>(n_ - 2) || r != std::floor(r))
      throw RevealError("with x[" + std::to_string(i) + "] = 2^" + std::to_string(std::ilogb(big_)) + ", x[" +
                        std::to_string(j) + "] = -2^" + std::to_string(std::ilogb(big_)) +
                        " and every other input 1 the result was " + number(r) + ", not a count of 1s from 0 to " +
                        std::to_string(n_ - 2) +
                        ": this is not one tree of float additions (a compensated or exact sum, one wider than "
                        "fp64, or not a sum)");
    const size_t size = n_ - static_cast<size_t>(r);
    cache_.emplace(key, size);
    return size;
  }

  // The subtree whose terms are exactly `terms` (ascending), probed from term `pivot` of them (a
  // random one if none is given); returns its node id.
  size_t subtree(const std::vector<size_t>& terms, std::optional<size_t> chosen = std::nullopt) {
    if (terms.size() == 1) return terms[0];
    const size_t pivot = chosen ? *chosen : random_member(terms);
    std::map<size_t, std::vector<size_t>> by_size;  // the pivot's ancestors, smallest first
    for (size_t term : terms) {
      if (term == pivot) continue;
      const size_t s = meet_size(pivot, term);
      if (s > terms.size()) contradiction(pivot, term, s, terms.size());
      by_size[s].push_back(term);
    }
    size_t current = pivot, gathered = 1;
    for (const auto& [size, group] : by_size) {
      gathered += group.size();
      if (gathered != size) contradiction(pivot, group[0], size, gathered);
      std::vector<size_t> children{current};
      for (size_t child : siblings(group, size)) children.push_back(child);
      current = tree_.add(std::move(children));
    }
    return current;
  }

  RevealedSum run() {
    const auto started = std::chrono::steady_clock::now();
    tree_.terms = n_;
    std::vector<size_t> all(n_);
    for (size_t i = 0; i < n_; ++i) all[i] = i;
    tree_.root = n_ == 0 ? 0 : subtree(all);
    RevealedSum out{std::move(tree_), calls_, 0};
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return out;
  }

 private:
  // `group` (ascending): the terms of one or more sibling subtrees under a node of `parent_size`
  // terms; their node ids.
  std::vector<size_t> siblings(std::vector<size_t> group, size_t parent_size) {
    std::vector<size_t> out;
    while (!group.empty()) {
      const size_t pivot = random_member(group);
      std::vector<size_t> mine, rest;
      for (size_t term : group) {
        const size_t s = term == pivot ? 0 : meet_size(pivot, term);
        if (s > parent_size) contradiction(pivot, term, s, parent_size);
        (s < parent_size ? mine : rest).push_back(term);
      }
      out.push_back(subtree(mine, pivot));  // the pivot's sizes are known: no call is repeated
      group = std::move(rest);
    }
    return out;
  }

  // A random pivot: the smallest term would make a sum added last-to-first cost n^2 / 2 calls
  // (each pivot then sits at the top of what is left); a random one cuts a chain at a random
  // place, about 2n calls in all. Seeded by n, so that a run is repeatable.
  size_t random_member(const std::vector<size_t>& terms) {
    return terms[std::uniform_int_distribution<size_t>(0, terms.size() - 1)(rng_)];
  }

  [[noreturn]] void contradiction(size_t i, size_t j, size_t said, size_t expected) const {
    throw RevealError("the results contradict one tree of additions: terms " + std::to_string(i) + " and " +
                      std::to_string(j) + " meet in " + std::to_string(said) + " terms where " +
                      std::to_string(expected) + " were expected (is the function deterministic?)");
  }
  static std::string number(float v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
    return text;
  }

  const SumFunction& sum_;
  size_t n_;
  std::vector<float> x_;
  float big_;
  std::map<std::pair<size_t, size_t>, size_t> cache_;
  std::mt19937_64 rng_{n_};
  size_t calls_ = 0;
  sim::AdditionTree tree_;
};

}  // namespace

SumFunction dot_with_ones(DotFunction dot) {
  return [dot = std::move(dot)](std::span<const float> x) { return dot(x, std::vector<float>(x.size(), 1.0f)); };
}

float absorbing_value(size_t n) {
  // ulp(2^e) in fp64 is 2^(e - 52); it must exceed 2n so that M + k == M for k <= n.
  const int e = 54 + static_cast<int>(std::bit_width(n));
  return std::ldexp(1.0f, std::min(e, 126));
}

RevealedSum reveal_sum(const SumFunction& sum, size_t n) {
  if (n < 2) throw RevealError("n must be at least 2 (a sum of one term has no order)");
  if (n > (size_t{1} << 24)) throw RevealError("n must be at most 2^24 (the count of 1s must stay exact in fp32)");
  // The probing recurses once per level of the tree, and a sequential sum of n terms has up to
  // n levels: it runs on a thread whose stack holds them (a few hundred bytes a level).
  struct Job {
    const SumFunction& sum;
    size_t n;
    std::optional<RevealedSum> result;
    std::exception_ptr error;
  } job{sum, n, std::nullopt, nullptr};
  const auto body = [](void* p) -> void* {
    auto& j = *static_cast<Job*>(p);
    try {
      j.result = Prober(j.sum, j.n).run();
    } catch (...) {
      j.error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, (size_t{16} << 20) + n * 2048);
  pthread_t thread;
  const int started = pthread_create(&thread, &attributes, body, &job);
  pthread_attr_destroy(&attributes);
  if (started != 0) throw RevealError("cannot start the probing thread (" + std::string(std::strerror(started)) + ")");
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
  return std::move(*job.result);
}

}  // namespace fplab::reveal
