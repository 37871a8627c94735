#include "sim/addition_steps.hpp"

#include <stdexcept>

#include "sim/cub_reduce.hpp"
#include "sim/schedule.hpp"
#include "sim/torch_cascade.hpp"

namespace fplab::sim {

AdditionSteps reducer_addition_steps(const Reducer& reducer, size_t n) {
  if (reducer.kind == Reducer::Kind::torch_cascade) return torch_cascade_steps(n, reducer.cascade_lanes);
  if (reducer.kind == Reducer::Kind::cub_reduce) return cub_reduce_steps(n, reducer.cub);
  throw std::logic_error("reducer_addition_steps: not a reducer given by its additions");
}

}  // namespace fplab::sim
