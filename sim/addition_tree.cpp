#include "sim/addition_tree.hpp"

#include <algorithm>

#include "sim/schedule_walk.hpp"

namespace fplab::sim {
namespace {

// schedule_walk's Ops over node ids: each addition or fused step becomes a node.
struct ShapeOps {
  using Value = size_t;
  AdditionTree& tree;
  static constexpr size_t kZero = static_cast<size_t>(-1);  // an empty group's sum: no node

  Value zero() { return kZero; }
  Value finish(const Value& v) { return v; }
  Value add(const Value& x, const Value& y) {
    if (x == kZero) return y;
    if (y == kZero) return x;
    return tree.add({x, y});
  }
  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    if (r.kind != Reducer::Kind::fused) {
      tree.opaque = true;
      return group.size() == 1 ? group[0] : tree.add(std::vector<size_t>(group.begin(), group.end()));
    }
    // fused(N,F): a chain of steps, each the accumulator and the next N terms (schedule_tree.cpp).
    const size_t n = static_cast<size_t>(std::max(1, r.fused_products));
    Value acc = kZero;
    for (size_t k = 0; k < group.size(); k += n) {
      std::vector<size_t> children;
      if (acc != kZero) children.push_back(acc);
      children.insert(children.end(), group.begin() + static_cast<ptrdiff_t>(k),
                      group.begin() + static_cast<ptrdiff_t>(std::min(group.size(), k + n)));
      acc = children.size() == 1 ? children[0] : tree.add(std::move(children));
    }
    return acc;
  }
};

}  // namespace

size_t AdditionTree::add(std::vector<size_t> children) {
  nodes.push_back(std::move(children));
  return terms + nodes.size() - 1;
}

std::string AdditionTree::text() const {
  if (terms == 0) return "()";
  std::vector<size_t> smallest(terms + nodes.size());
  for (size_t i = 0; i < terms; ++i) smallest[i] = i;
  for (size_t j = 0; j < nodes.size(); ++j) {  // children are made before their parents
    size_t m = static_cast<size_t>(-1);
    for (size_t c : nodes[j]) m = std::min(m, smallest[c]);
    smallest[terms + j] = m;
  }
  // Written without recursion: a sequential sum of a million terms is a million levels deep.
  constexpr size_t kOpen = static_cast<size_t>(-1), kClose = static_cast<size_t>(-2),
                   kPlus = static_cast<size_t>(-3);
  std::string out;
  std::vector<size_t> pending{root};
  while (!pending.empty()) {
    const size_t item = pending.back();
    pending.pop_back();
    if (item == kOpen || item == kClose || item == kPlus) {
      out += item == kOpen ? '(' : item == kClose ? ')' : '+';
    } else if (item < terms) {
      out += std::to_string(item);
    } else {
      std::vector<size_t> children = nodes[item - terms];
      std::sort(children.begin(), children.end(), [&](size_t a, size_t b) { return smallest[a] < smallest[b]; });
      pending.push_back(kClose);
      for (size_t k = children.size(); k-- > 0;) {
        pending.push_back(children[k]);
        if (k > 0) pending.push_back(kPlus);
      }
      pending.push_back(kOpen);
    }
  }
  return out;
}

std::string AdditionTree::dot() const {
  std::string out = "digraph addition_tree {\n  rankdir=BT;\n  node [fontname=\"Helvetica\"];\n";
  // The terms in one row, in index order: invisible edges hold Graphviz to it.
  out += "  { rank=same;";
  for (size_t i = 0; i < terms; ++i) out += " t" + std::to_string(i) + ";";
  out += " }\n";
  for (size_t i = 0; i + 1 < terms; ++i)
    out += "  t" + std::to_string(i) + " -> t" + std::to_string(i + 1) + " [style=invis];\n";
  for (size_t i = 0; i < terms; ++i)
    out += "  t" + std::to_string(i) + " [label=\"x" + std::to_string(i) + "\", shape=box];\n";
  const auto id = [&](size_t v) { return v < terms ? "t" + std::to_string(v) : "n" + std::to_string(v - terms); };
  for (size_t j = 0; j < nodes.size(); ++j) {
    const bool fused = nodes[j].size() > 2;
    out += "  n" + std::to_string(j) + " [label=\"" + (fused ? std::to_string(nodes[j].size()) + "-term node" : "+") +
           "\", shape=" + (fused ? "box, style=rounded" : "circle") + "];\n";
    for (size_t c : nodes[j]) out += "  " + id(c) + " -> n" + std::to_string(j) + ";\n";
  }
  return out + "}\n";
}

size_t AdditionTree::additions() const {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [](const auto& c) { return c.size() == 2; }));
}

size_t AdditionTree::multi_term_nodes() const { return nodes.size() - additions(); }

size_t AdditionTree::depth() const {
  std::vector<size_t> below(terms + nodes.size(), 0);
  for (size_t j = 0; j < nodes.size(); ++j)  // children are made before their parents
    for (size_t c : nodes[j]) below[terms + j] = std::max(below[terms + j], below[c] + 1);
  return below.empty() ? 0 : below[root];
}

AdditionTree schedule_addition_tree(const Schedule& schedule, size_t k, const NoiseKey& key) {
  AdditionTree tree;
  tree.terms = k;
  ShapeOps ops{tree};
  std::vector<size_t> leaves(k);
  for (size_t i = 0; i < k; ++i) leaves[i] = i;
  const size_t root = detail::walk(ops, schedule, std::move(leaves), key);
  tree.root = root == ShapeOps::kZero ? 0 : root;
  return tree;
}

}  // namespace fplab::sim
