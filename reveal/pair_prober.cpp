#include "reveal/pair_prober.hpp"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

namespace fplab::reveal::detail {
namespace {

std::string number(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

}  // namespace

PairProber::PairProber(const SumFunction& sum, size_t n)
    : sum_(sum), n_(n), x_(n, 1.0f), big_(absorbing_value(n)), rng_(n) {
  tree_.terms = n;
}

size_t PairProber::probe(size_t i, size_t j) {
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
  return n_ - static_cast<size_t>(r);
}

size_t PairProber::meet_size(size_t i, size_t j) {
  const auto key = std::minmax(i, j);
  if (const auto found = cache_.find(key); found != cache_.end()) return found->second;
  const size_t size = probe(i, j);
  cache_.emplace(key, size);
  return size;
}

size_t PairProber::subtree(const std::vector<size_t>& terms, std::optional<size_t> chosen) {
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

// `group` (ascending): the terms of one or more sibling subtrees under a node of `parent_size`
// terms; their node ids.
std::vector<size_t> PairProber::siblings(std::vector<size_t> group, size_t parent_size) {
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

size_t PairProber::random_member(const std::vector<size_t>& terms) {
  return terms[std::uniform_int_distribution<size_t>(0, terms.size() - 1)(rng_)];
}

void PairProber::contradiction(size_t i, size_t j, size_t said, size_t expected) const {
  throw RevealError("the results contradict one tree of additions: terms " + std::to_string(i) + " and " +
                    std::to_string(j) + " meet in " + std::to_string(said) + " terms where " +
                    std::to_string(expected) +
                    " were expected (is the function deterministic? --runs probes a varying order)");
}

void run_with_deep_stack(size_t n, const std::function<void()>& body) {
  struct Job {
    const std::function<void()>& body;
    std::exception_ptr error;
  } job{body, nullptr};
  const auto entry = [](void* p) -> void* {
    auto& j = *static_cast<Job*>(p);
    try {
      j.body();
    } catch (...) {
      j.error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, (size_t{16} << 20) + n * 2048);
  pthread_t thread;
  const int started = pthread_create(&thread, &attributes, entry, &job);
  pthread_attr_destroy(&attributes);
  if (started != 0) throw RevealError("cannot start the probing thread (" + std::string(std::strerror(started)) + ")");
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace fplab::reveal::detail
