#include "sim/schedule_tree.hpp"

#include <algorithm>

#include "sim/schedule_walk.hpp"

namespace fplab::sim {
namespace {

class TreeOps {
 public:
  using Value = size_t;  // node index

  struct Node {
    std::string label;
    std::vector<size_t> children;
    size_t depth = 0;
  };
  std::vector<Node> nodes;
  size_t additions = 0, whole_group_nodes = 0;

  Value leaf(size_t i) { return make("t" + std::to_string(i), {}, 0); }
  Value zero() { return make("0", {}, 0); }
  Value finish(const Value& v) { return v; }
  Value add(const Value& x, const Value& y) {
    ++additions;
    return make("+", {x, y}, std::max(nodes[x].depth, nodes[y].depth) + 1);
  }
  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    ++whole_group_nodes;
    size_t depth = 0;
    for (Value v : group) depth = std::max(depth, nodes[v].depth);
    return make(to_string(r), {group.begin(), group.end()}, depth + 1);
  }

 private:
  Value make(std::string label, std::vector<size_t> children, size_t depth) {
    nodes.push_back({std::move(label), std::move(children), depth});
    return nodes.size() - 1;
  }
};

// The same walk keeping only each partial's depth.
struct DepthOps {
  using Value = size_t;
  Value zero() { return 0; }
  Value finish(const Value& v) { return v; }
  Value add(const Value& x, const Value& y) { return std::max(x, y) + 1; }
  Value reduce_whole(const Reducer&, std::span<const Value> group, uint64_t) {
    return *std::max_element(group.begin(), group.end()) + 1;
  }
};

}  // namespace

size_t schedule_depth(const Schedule& schedule, size_t k, const NoiseKey& key) {
  DepthOps ops;
  return detail::walk(ops, schedule, std::vector<size_t>(k, 0), key);
}

ScheduleTree draw_schedule(const Schedule& schedule, size_t k, const NoiseKey& key) {
  TreeOps ops;
  std::vector<size_t> leaves;
  for (size_t i = 0; i < k; ++i) leaves.push_back(ops.leaf(i));
  const size_t root = detail::walk(ops, schedule, leaves, key);

  std::string dot = "digraph reduction {\n  label=\"" + to_string(schedule) + "  (K=" + std::to_string(k) +
                    ")\";\n  labelloc=t;\n  rankdir=BT;\n  node [fontname=\"Helvetica\"];\n";
  for (size_t i = 0; i < ops.nodes.size(); ++i) {
    const auto& n = ops.nodes[i];
    const bool is_leaf = n.children.empty();
    dot += "  n" + std::to_string(i) + " [label=\"" + n.label + "\"" +
           (is_leaf ? ", shape=box" : (n.label == "+" ? ", shape=circle" : ", shape=hexagon")) +
           (i == root ? ", style=bold" : "") + "];\n";
  }
  for (size_t i = 0; i < ops.nodes.size(); ++i)
    for (size_t c : ops.nodes[i].children) dot += "  n" + std::to_string(c) + " -> n" + std::to_string(i) + ";\n";
  dot += "}\n";
  return {dot, ops.additions, ops.nodes[root].depth, ops.whole_group_nodes};
}

}  // namespace fplab::sim
