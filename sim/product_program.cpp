#include "sim/product_program.hpp"

#include <algorithm>
#include <climits>
#include <span>
#include <stdexcept>

#include "sim/noise.hpp"
#include "sim/schedule_walk.hpp"

namespace fplab::sim::detail {
namespace {

// A node of a group's tree of additions: product term `term` (left < 0), or the addition of the
// nodes left and right, in that order.
struct Node {
  int32_t left = -1, right = -1;
  uint32_t term = 0;
  bool product() const { return left < 0; }
};

// schedule_walk.hpp's Ops, recording the additions a reducer makes instead of doing them. Nodes
// are appended, so an addition's operands always come before it.
class TreeRecorder {
 public:
  using Value = int32_t;
  explicit TreeRecorder(std::vector<Node>& nodes) : nodes_(nodes) {}
  Value add(Value x, Value y) {
    nodes_.push_back({x, y, 0});
    return static_cast<Value>(nodes_.size() - 1);
  }
  Value finish(Value v) { return v; }
  // Only a held stage ("@F>H") starts from zero, and such schedules never reach a program.
  Value zero() { throw std::logic_error("product_program: a held stage has no program"); }
  Value reduce_whole(const Reducer& r, std::span<const Value>, uint64_t) {
    throw std::logic_error("product_program: " + to_string(r) + " has no fixed order of additions");
  }

 private:
  std::vector<Node>& nodes_;
};

bool is_pair(const std::vector<Node>& nodes, const Node& n) {
  return !n.product() && nodes[n.left].product() && nodes[n.right].product();
}

// Appends the steps that evaluate trees of additions, keeping count of the stack they use.
class StepWriter {
 public:
  explicit StepWriter(ProductProgram& program) : program_(program) {}

  // The steps that leave node `root` of `nodes` as the running value.
  void evaluate(const std::vector<Node>& nodes, int32_t root) {
    compute_stack_needs(nodes);
    // Work still to do, last first: a node to evaluate, or a step to append once the nodes
    // pushed after it are evaluated (an explicit stack: rev's tree is K deep).
    struct Work {
      int32_t node;  // < 0: append `step`
      ProductStep step;
    };
    std::vector<Work> work = {{root, {}}};
    while (!work.empty()) {
      const Work w = work.back();
      work.pop_back();
      if (w.node < 0) {
        append(w.step);
        continue;
      }
      const Node& n = nodes[w.node];
      using K = ProductStep::Kind;
      if (n.product()) {
        append({K::product, false, {n.term}});
        continue;
      }
      const Node &left = nodes[n.left], &right = nodes[n.right];
      if (left.product() && right.product()) {
        append({K::pair, false, {left.term, right.term}});
      } else if (is_pair(nodes, left) && is_pair(nodes, right)) {
        append({K::quad,
                false,
                {nodes[left.left].term, nodes[left.right].term, nodes[right.left].term, nodes[right.right].term}});
      } else if (left.product() || right.product()) {  // the other operand first, then one FMA
        work.push_back({-1, {K::fmas, false, {left.product() ? left.term : right.term, 1}}});
        work.push_back({left.product() ? n.right : n.left, {}});
      } else {
        // The operand needing the deeper stack first, so that the other waits on the stack the
        // shorter time (Sethi-Ullman order).
        const bool left_first = need_[n.left] >= need_[n.right];
        work.push_back({-1, {K::add_popped}});
        work.push_back({left_first ? n.right : n.left, {}});
        work.push_back({left_first ? n.left : n.right, {}});
      }
    }
  }

  void store(uint32_t group) {
    append({ProductStep::Kind::store, false, {group}});
    ++program_.groups;
  }

 private:
  // need_[i]: the running value and stack entries node i's evaluation uses at most.
  void compute_stack_needs(const std::vector<Node>& nodes) {
    need_.assign(nodes.size(), 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.product()) continue;
      const Node &left = nodes[n.left], &right = nodes[n.right];
      if ((left.product() && right.product()) || (is_pair(nodes, left) && is_pair(nodes, right)))
        need_[i] = 1;
      else if (left.product() || right.product())
        need_[i] = need_[left.product() ? n.right : n.left];
      else
        need_[i] = need_[n.left] == need_[n.right] ? need_[n.left] + 1 : std::max(need_[n.left], need_[n.right]);
    }
  }

  void append(ProductStep step) {
    using K = ProductStep::Kind;
    if (step.kind == K::pair || step.kind == K::quad || step.kind == K::product) {
      step.push = running_;
      if (running_) program_.depth = std::max(program_.depth, ++stacked_);
      running_ = true;
    } else if (step.kind == K::fmas && !program_.steps.empty() && extends_chain(program_.steps.back(), step.p[0])) {
      return;
    } else if (step.kind == K::add_popped) {
      --stacked_;
    } else if (step.kind == K::store) {
      running_ = false;
    }
    program_.steps.push_back(step);
  }

  // Appends term t to `last` where it is a chain of FMAs that t continues.
  static bool extends_chain(ProductStep& last, uint32_t t) {
    if (last.kind != ProductStep::Kind::fmas) return false;
    const uint32_t count = last.p[1];
    const int64_t delta = int64_t{t} - last.p[0];
    if (count == 1 && delta >= INT32_MIN && delta <= INT32_MAX) {
      last.p[2] = static_cast<uint32_t>(static_cast<int32_t>(delta));
    } else if (count == 1 || delta != int64_t{static_cast<int32_t>(last.p[2])} * count) {
      return false;
    }
    last.p[1] = count + 1;
    return true;
  }

  ProductProgram& program_;
  std::vector<size_t> need_;
  bool running_ = false;
  size_t stacked_ = 0;
};

// Renumbers the steps' terms in the order they are read, recording it in program.order. Every
// term is read once, so a chain of FMAs reads consecutive numbers after it.
void number_terms_by_first_use(ProductProgram& program) {
  using K = ProductStep::Kind;
  for (ProductStep& step : program.steps) {
    const auto next = [&program](uint32_t term) {
      program.order.push_back(term);
      return static_cast<uint32_t>(program.order.size() - 1);
    };
    switch (step.kind) {
      case K::pair:
      case K::quad:
        for (int i = 0; i < (step.kind == K::pair ? 2 : 4); ++i) step.p[i] = next(step.p[i]);
        break;
      case K::product:
        step.p[0] = next(step.p[0]);
        break;
      case K::fmas: {
        const int64_t first = step.p[0], delta = static_cast<int32_t>(step.p[2]);
        step.p[0] = next(static_cast<uint32_t>(first));
        for (uint32_t i = 1; i < step.p[1]; ++i) next(static_cast<uint32_t>(first + i * delta));
        step.p[2] = 1;
        break;
      }
      case K::add_popped:
      case K::store:
        break;
    }
  }
}

}  // namespace

bool has_product_program(const Reducer& reducer) {
  using K = Reducer::Kind;
  switch (reducer.kind) {
    case K::tree:
    case K::rev:
    case K::shfl_down:
    case K::shfl_up:
    case K::shfl_xor:
    case K::numpy_pairwise:
      return true;
    default:
      return false;
  }
}

ProductProgram product_program(const Stage& stage, size_t k) {
  if (!stage.reduces() || !has_product_program(stage.reducer))
    throw std::logic_error("product_program: " + to_string(stage) + " is not a stage of fixed additions");
  ProductProgram program;
  StepWriter writer(program);
  std::vector<Node> nodes;
  const auto groups = groups_of(stage.grouping, k);
  for (size_t g = 0; g < groups.size(); ++g) {
    nodes.clear();
    std::vector<int32_t> members(groups[g].count);
    for (size_t i = 0; i < members.size(); ++i) {
      nodes.push_back({-1, -1, static_cast<uint32_t>(groups[g].first + i * groups[g].stride)});
      members[i] = static_cast<int32_t>(i);
    }
    TreeRecorder recorder(nodes);
    // The reducers covered draw no noise: the key and ids are never read.
    const int32_t root = reduce_group(recorder, stage.reducer, std::move(members), NoiseKey{}, 0, g);
    writer.evaluate(nodes, root);
    writer.store(static_cast<uint32_t>(g));
  }
  number_terms_by_first_use(program);
  return program;
}

}  // namespace fplab::sim::detail
