// The accepted range of every number in a training recipe: one rule, used where the number
// enters, for `fplab train`'s options and `--config` files and for experiment TOML files alike.
// Keys are spelled as in the TOML files (lr, weight_decay, train_subset, ...). A number outside
// its range (NaN and infinities included) would otherwise train silently to garbage: lr 1e308
// reaches a NaN loss and 10% accuracy with exit code 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fplab::models {

// Throws std::invalid_argument with "must be ..." (no key; the caller names it where it came
// from) when `value` is outside `key`'s range; std::logic_error for a key without a rule.
void check_recipe_number(std::string_view key, double value);

// The same for a whole number given as such (TOML integers, CLI integers), so that values past
// 2^53 are judged exactly.
void check_recipe_integer(std::string_view key, int64_t value);

// "from 0 to 16" etc.: the range of `key` in words, for help texts.
std::string recipe_number_range(std::string_view key);

}  // namespace fplab::models
