// Order-independent reproducible summation (the ReproBLAS / Demmel-Nguyen idea): each term is
// split on fixed grids derived from max|x| and n into three "folds"; each fold's pieces are
// multiples of its grid and add exactly, so the result depends only on the multiset of terms.
// It is not correctly rounded: what falls below the third fold is dropped.
#pragma once

#include <span>

#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::sim {

// Three folds of 52 - ceil(log2 n) bits each, held in binary64 bins (as ReproBLAS does); the fold
// sums are added largest first with the format's rounding. inf/NaN terms give the IEEE result.
// n must be below 2^50.
double binned_sum(std::span<const double> terms, const fp::Format& format, const fp::RoundingOptions& options);

}  // namespace fplab::sim
