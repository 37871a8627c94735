#include "sim/schedule_tree.hpp"

#include <algorithm>

#include "sim/schedule_walk.hpp"

namespace fplab::sim {
namespace {

// A fused(N,F) step over a group runs as a chain: the accumulator (0 at first) and the next N
// terms are added exactly and rounded once, then the result is the next step's accumulator
// (fused_dot in sim/tensor_core.cpp). `step(acc, chunk)` builds one link; returns the last.
template <class Value, class Step>
Value fused_chain(const Reducer& r, std::span<const Value> group, const Value* start, Step step) {
  const size_t n = static_cast<size_t>(std::max(1, r.fused_products));
  const Value* acc = start;
  Value last{};
  for (size_t k = 0; k < group.size(); k += n) {
    last = step(acc, group.subspan(k, std::min(n, group.size() - k)));
    acc = &last;
  }
  return last;
}

class TreeOps {
 public:
  using Value = size_t;  // node index

  enum class Shape { term, zero, addition, fused, whole_group };
  struct Node {
    std::string label;
    Shape shape;
    std::vector<size_t> children;  // for fused: the accumulator first, when there is one
    size_t depth = 0;
    bool has_accumulator = false;
  };
  std::vector<Node> nodes;
  size_t additions = 0, fused_operations = 0, whole_group_nodes = 0;

  Value leaf(size_t i) { return make("t" + std::to_string(i), Shape::term, {}, 0); }
  Value zero() { return make("0", Shape::zero, {}, 0); }
  Value finish(const Value& v) { return v; }
  Value add(const Value& x, const Value& y) {
    ++additions;
    return make("+", Shape::addition, {x, y}, std::max(nodes[x].depth, nodes[y].depth) + 1);
  }
  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    if (r.kind == Reducer::Kind::fused)
      return fused_chain<Value>(r, group, nullptr, [&](const Value* acc, std::span<const Value> chunk) {
        ++fused_operations;
        std::vector<size_t> children;
        size_t depth = 0;
        if (acc) children.push_back(*acc);
        children.insert(children.end(), chunk.begin(), chunk.end());
        for (Value v : children) depth = std::max(depth, nodes[v].depth);
        const std::string terms = std::to_string(chunk.size()) + (chunk.size() == 1 ? " term" : " terms");
        const Value made = make((acc ? "fused: acc + " : "fused: ") + terms + "\\n1 rounding", Shape::fused,
                                std::move(children), depth + 1);
        nodes[made].has_accumulator = acc != nullptr;
        return made;
      });
    ++whole_group_nodes;
    size_t depth = 0;
    for (Value v : group) depth = std::max(depth, nodes[v].depth);
    // kahan and neumaier round inside; drawn as one node, their error is not one rounding's
    return make(to_string(r), Shape::whole_group, {group.begin(), group.end()}, depth + 1);
  }

 private:
  Value make(std::string label, Shape shape, std::vector<size_t> children, size_t depth) {
    nodes.push_back({std::move(label), shape, std::move(children), depth, false});
    return nodes.size() - 1;
  }
};

// The same walk keeping only each partial's depth.
struct DepthOps {
  using Value = size_t;
  Value zero() { return 0; }
  Value finish(const Value& v) { return v; }
  Value add(const Value& x, const Value& y) { return std::max(x, y) + 1; }
  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    if (r.kind == Reducer::Kind::fused)
      return fused_chain<Value>(r, group, nullptr, [](const Value* acc, std::span<const Value> chunk) {
        return std::max(acc ? *acc : 0, *std::max_element(chunk.begin(), chunk.end())) + 1;
      });
    return *std::max_element(group.begin(), group.end()) + 1;
  }
};

// The same walk counting the nodes draw_schedule() makes (a term or zero is one node too).
struct CountOps {
  using Value = char;  // nothing to carry
  size_t nodes = 0;
  Value zero() { return ++nodes, 0; }
  Value finish(const Value& v) { return v; }
  Value add(const Value&, const Value&) { return ++nodes, 0; }
  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    const size_t n = r.kind == Reducer::Kind::fused ? static_cast<size_t>(std::max(1, r.fused_products)) : group.size();
    nodes += (group.size() + n - 1) / n;
    return 0;
  }
};

const char* node_style(const TreeOps::Node& n) {
  switch (n.shape) {
    case TreeOps::Shape::term:
      return ", shape=box";
    case TreeOps::Shape::zero:
      return ", shape=box, style=dashed";
    case TreeOps::Shape::addition:
      return ", shape=circle";
    case TreeOps::Shape::fused:
      return ", shape=box, style=\"rounded,filled\", fillcolor=\"#dde8f7\"";
    case TreeOps::Shape::whole_group:
      return ", shape=hexagon";
  }
  return "";
}

}  // namespace

size_t schedule_depth(const Schedule& schedule, size_t k, const NoiseKey& key) {
  DepthOps ops;
  return detail::walk(ops, schedule, std::vector<size_t>(k, 0), key);
}

size_t schedule_tree_nodes(const Schedule& schedule, size_t k, const NoiseKey& key) {
  CountOps ops;
  ops.nodes = k;
  detail::walk(ops, schedule, std::vector<char>(k, 0), key);
  return ops.nodes;
}

ScheduleTree draw_schedule(const Schedule& schedule, size_t k, const NoiseKey& key) {
  TreeOps ops;
  std::vector<size_t> leaves;
  for (size_t i = 0; i < k; ++i) leaves.push_back(ops.leaf(i));
  const size_t root = detail::walk(ops, schedule, leaves, key);

  // ordering=in keeps each node's inputs left to right in the order listed (the terms' order).
  std::string dot = "digraph reduction {\n  label=\"" + to_string(schedule) + "  (K=" + std::to_string(k) +
                    ")\";\n  labelloc=t;\n  rankdir=BT;\n  ordering=in;\n  node [fontname=\"Helvetica\"];\n";
  for (size_t i = 0; i < ops.nodes.size(); ++i) {
    const auto& n = ops.nodes[i];
    dot += "  n" + std::to_string(i) + " [label=\"" + n.label + "\"" + node_style(n) +
           (i == root ? ", penwidth=2.5" : "") + "];\n";
  }
  // The terms on one rank, chained by invisible edges: Graphviz then keeps them in index order,
  // so that a strided or shuffled schedule shows its crossings instead of hiding them. Each rank
  // an edge skips costs dot a virtual node to route through crossing minimisation: a seq chain of
  // 100 terms on one rank took 16 s (5000 virtual nodes), 50 terms 0.2 s. Past kOneRowBudget
  // the terms stay beside their first addition, ordered by ordering=in only.
  constexpr size_t kOneRowBudget = 1500;
  size_t skipped_ranks = 0;
  for (const auto& n : ops.nodes)
    for (size_t c : n.children) skipped_ranks += n.depth - 1 - (ops.nodes[c].children.empty() ? 0 : ops.nodes[c].depth);
  if (k > 1 && skipped_ranks <= kOneRowBudget) {
    // One edge statement each: dot's parser runs out of stack on a chain of thousands.
    dot += "  { rank=same;\n";
    for (size_t i = 0; i + 1 < k; ++i)
      dot += "    n" + std::to_string(leaves[i]) + " -> n" + std::to_string(leaves[i + 1]) + " [style=invis];\n";
    dot += "  }\n";
  }
  for (size_t i = 0; i < ops.nodes.size(); ++i) {
    const auto& n = ops.nodes[i];
    for (size_t c = 0; c < n.children.size(); ++c)
      dot += "  n" + std::to_string(n.children[c]) + " -> n" + std::to_string(i) +
             (n.has_accumulator && c == 0 ? " [label=\"acc\", style=bold]" : "") + ";\n";
  }
  dot += "}\n";
  return {dot, ops.nodes.size(), ops.additions, ops.fused_operations, ops.whole_group_nodes, ops.nodes[root].depth};
}

}  // namespace fplab::sim
