#include "models/recipe_limits.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace fplab::models {
namespace {

struct Limit {
  std::string_view key;
  double low, high;
  bool low_open, high_open;  // whether the bound itself is excluded
  bool whole;                // a whole number
};

// Wide enough for every recipe the research uses, narrow enough to refuse what cannot train.
constexpr Limit kLimits[] = {
    {"lr", 0, 100, true, false, false},
    {"momentum", 0, 1, false, true, false},
    {"weight_decay", 0, 1, false, false, false},
    {"dropout", 0, 1, false, true, false},
    {"lr_decay_factor", 0, 1, true, false, false},
    {"lr_decay_every", 0, 1e6, false, false, true},
    {"epochs", 1, 1e5, false, false, true},
    {"batch", 0, 1e7, false, false, true},             // 0: the whole training set as one batch
    {"train_subset", 0, 1e9, false, false, true},      // 0: all
    {"imbalance_class", -1, 255, false, false, true},  // -1: none; the data set bounds it further
    {"imbalance_percent", 0, 100, false, false, false},
    {"augment_pad", 0, 64, false, false, true},
    {"hidden", 1, 1 << 20, false, false, true},
    {"kernel", 1, 7, false, false, true},
    {"replicas", 2, 1e5, false, false, true},
    {"checkpoint_every", 1, 1e9, false, false, true},
};

const Limit& limit_of(std::string_view key) {
  for (const auto& l : kLimits)
    if (l.key == key) return l;
  throw std::logic_error("no range is known for recipe key '" + std::string(key) + "'");
}

std::string number_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", v);
  return buffer;
}

std::string range_text(const Limit& l) {
  std::string s = l.whole ? "a whole number " : "a number ";
  if (!l.low_open && !l.high_open) return s + "from " + number_text(l.low) + " to " + number_text(l.high);
  s += (l.low_open ? "greater than " : "at least ") + number_text(l.low);
  return s + (l.high_open ? " and less than " : " and at most ") + number_text(l.high);
}

bool inside(const Limit& l, double v) {
  if (!std::isfinite(v)) return false;
  if (l.low_open ? v <= l.low : v < l.low) return false;
  if (l.high_open ? v >= l.high : v > l.high) return false;
  return !l.whole || v == std::floor(v);
}

}  // namespace

void check_recipe_number(std::string_view key, double value) {
  const Limit& l = limit_of(key);
  if (!inside(l, value)) throw std::invalid_argument("must be " + range_text(l) + ", not " + number_text(value));
}

void check_recipe_integer(std::string_view key, int64_t value) {
  const Limit& l = limit_of(key);
  // The bounds are far below 2^53, so comparing as doubles is exact whenever it matters.
  if (value < static_cast<int64_t>(l.low) || value > static_cast<int64_t>(l.high) ||
      !inside(l, static_cast<double>(value)))
    throw std::invalid_argument("must be " + range_text(l) + ", not " + std::to_string(value));
}

std::string recipe_number_range(std::string_view key) { return range_text(limit_of(key)); }

}  // namespace fplab::models
