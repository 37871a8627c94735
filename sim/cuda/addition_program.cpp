#include "sim/cuda/addition_program.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "sim/addition_tree.hpp"
#include "sim/cuda/gpu_plan.hpp"

namespace fplab::sim::gpu {
namespace {

bool two_term_additions(const std::vector<Stage>& stages, std::string& why) {
  using K = Reducer::Kind;
  for (const Stage& st : stages) {
    if (st.format || st.hold) {
      why = "stage formats have no GPU kernel";
      return false;
    }
    if (!two_term_additions(st.inner, why)) return false;
    if (!st.reduces()) continue;
    const K kind = st.reducer.kind;
    if (kind == K::fused || kind == K::kahan || kind == K::neumaier || kind == K::exact || kind == K::binned) {
      why = "a " + to_string(st.reducer) + " step is not a two-term fp32 addition";
      return false;
    }
    if (kind == K::ring) {  // deterministic, but each output tile starts its ring elsewhere: no one program
      why = "a ring step's order depends on the output's tile";
      return false;
    }
  }
  return true;
}

}  // namespace

std::string addition_program_why_not(const Schedule& schedule) {
  std::string why;
  if (schedule.nondeterministic())
    why = "atomic and shuffle steps draw their order from the impl seed";
  else
    two_term_additions(schedule.stages, why);
  return why.empty() ? why
                     : "schedule '" + to_string(schedule) + "' is not realisable by the GPU addition program: " + why;
}

AdditionProgram addition_program(const Schedule& schedule, size_t n) {
  if (const std::string why = addition_program_why_not(schedule); !why.empty()) throw NotRealisable(why);
  const auto refuse = [&](const std::string& why) {
    return NotRealisable("schedule '" + to_string(schedule) + "' is not realisable by the GPU addition program: " + why);
  };
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    throw refuse(std::to_string(n) + " terms (1 to 2^30)");
  const AdditionTree tree = schedule_addition_tree(schedule, n);
  if (tree.opaque || tree.multi_term_nodes() > 0) throw refuse("its tree has steps of more than two terms");
  AdditionProgram program;
  program.terms = n;
  const size_t terms = tree.terms, nodes = tree.nodes.size();
  // The values a node's evaluation holds at most (Sethi-Ullman): a sum is commutative bit for bit,
  // so the child that needs more goes first, and a term second is added straight onto the top.
  std::vector<int> need(terms + nodes, 1);
  for (size_t j = 0; j < nodes; ++j) {  // children come before their parents
    const int a = need[tree.nodes[j][0]], b = need[tree.nodes[j][1]];
    need[terms + j] = a == b ? a + 1 : std::max(a, b);
  }
  // Post-order without recursion (a chain of a million terms is a million levels deep).
  enum class Do : uint8_t { evaluate, add_top, add_term };
  struct Item {
    Do what;
    size_t id;
  };
  std::vector<Item> pending{{Do::evaluate, tree.root}};
  int held = 0;
  while (!pending.empty()) {
    const Item item = pending.back();
    pending.pop_back();
    if (item.what == Do::add_top) {
      program.ops.push_back(AdditionProgram::kAdd);
      --held;
    } else if (item.what == Do::add_term) {
      program.ops.push_back(AdditionProgram::kAddTermBase - static_cast<int32_t>(item.id));
    } else if (item.id < terms) {
      program.ops.push_back(static_cast<int32_t>(item.id));
      program.depth = std::max(program.depth, ++held);
    } else {
      size_t first = tree.nodes[item.id - terms][0], second = tree.nodes[item.id - terms][1];
      // a term second when there is one (added straight onto the top), else the needier first
      if ((first < terms && second >= terms) || (first >= terms && second >= terms && need[second] > need[first]))
        std::swap(first, second);
      if (second < terms) {
        pending.push_back({Do::add_term, second});
      } else {
        pending.push_back({Do::add_top, 0});
        pending.push_back({Do::evaluate, second});
      }
      pending.push_back({Do::evaluate, first});
    }
  }
  if (program.depth > kMaxProgramDepth)
    throw refuse("it holds " + std::to_string(program.depth) + " partial sums at once (at most " +
                 std::to_string(kMaxProgramDepth) + ")");
  return program;
}

}  // namespace fplab::sim::gpu
