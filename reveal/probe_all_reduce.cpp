#include "reveal/probe_all_reduce.hpp"

#include <map>
#include <span>
#include <stdexcept>
#include <string>

#include "reveal/probe_sum.hpp"

namespace fplab::reveal {

RevealedAllReduce reveal_all_reduce(const AllReduceFunction& all_reduce, int ranks, size_t count, float large) {
  if (ranks < 2) throw std::invalid_argument("an all-reduce to reveal needs at least 2 ranks");
  const auto R = static_cast<size_t>(ranks);
  // reveal_sum asks its pairs with its own M; the all-reduce is asked with `large`.
  const float M = absorbing_value(R), asked = large != 0 ? large : M;
  RevealedAllReduce out;
  // answers[a * R + b][e]: element e's result with +M on rank a, -M on rank b, 1 elsewhere.
  std::vector<std::vector<float>> answers(R * R);
  for (size_t a = 0; a < R; ++a)
    for (size_t b = 0; b < R; ++b) {
      if (a == b) continue;
      std::vector<std::vector<float>> inputs(R, std::vector<float>(count, 1.0f));
      inputs[a].assign(count, asked);
      inputs[b].assign(count, -asked);
      answers[a * R + b] = all_reduce(inputs);
      ++out.calls;
      if (answers[a * R + b].size() != count)
        throw std::runtime_error("the all-reduce returned " + std::to_string(answers[a * R + b].size()) +
                                 " elements for " + std::to_string(count));
    }
  // Elements with the same answers to every pair have the same tree: reveal it once.
  std::map<std::vector<float>, uint32_t> seen;
  out.tree_of.resize(count);
  std::vector<float> key(R * R);
  for (size_t e = 0; e < count; ++e) {
    for (size_t p = 0; p < R * R; ++p) key[p] = answers[p].empty() ? 0.0f : answers[p][e];
    auto [it, fresh] = seen.emplace(key, static_cast<uint32_t>(out.trees.size()));
    if (fresh) {
      // reveal_sum asks pairs as a black box would be asked; answer from this element's results.
      const SumFunction element = [&](std::span<const float> x) -> float {
        size_t plus = R, minus = R;
        for (size_t r = 0; r < R; ++r) {
          if (x[r] == M)
            plus = r;
          else if (x[r] == -M)
            minus = r;
          else if (x[r] != 1.0f)
            throw RevealError("the all-reduce probe has no answer for that input");
        }
        if (plus == R || minus == R) throw RevealError("the all-reduce probe has no answer for that input");
        return answers[plus * R + minus][e];
      };
      try {
        out.trees.push_back(reveal_sum(element, R).tree);
      } catch (const RevealError& error) {
        throw RevealError("element " + std::to_string(e) + ": " + error.what());
      }
    }
    out.tree_of[e] = it->second;
  }
  return out;
}

}  // namespace fplab::reveal
