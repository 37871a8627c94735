#include "apps/device_option.hpp"

#include <cstdio>
#include <cstdlib>

#include "apps/cli_support.hpp"
#if FPLAB_WITH_CUDA
#include "models/gpu_backend.hpp"
#include "sim/cuda/gpu_device.hpp"
#endif

namespace fplab::app {

bool device_is_gpu(const std::string& device, const std::vector<profiles::OpTable>& tables, bool chatty) {
  if (device == "cpu") return false;
  if (device != "cuda" && device != "auto")
    throw UsageError("--device must be cpu, cuda or auto, not '" + device + "'");
  auto fall_back = [&](const std::string& why, const std::string& hint = "") {
    if (device == "cuda") throw UsageError("--device cuda: " + why + hint);
    if (chatty) std::fprintf(stderr, "--device auto: %s; training on the CPU\n", why.c_str());
    return false;
  };
#if FPLAB_WITH_CUDA
  std::string why;
  if (!sim::gpu::device_available(&why)) return fall_back(why, " (use --device cpu, or auto to fall back)");
  for (const auto& table : tables) {
    const auto problems = models::gpu_unsupported_ops(table);
    if (!problems.empty()) return fall_back(problems.front());
  }
  return true;
#else
  (void)tables;
  return fall_back("this fplab was built without CUDA (no nvcc at configure time)");
#endif
}

std::unique_ptr<models::ComputeBackend> gpu_backend(const profiles::OpTable& table) {
#if FPLAB_WITH_CUDA
  return models::make_gpu_backend(table);
#else
  (void)table;
  throw UsageError("--device cuda: this fplab was built without CUDA (no nvcc at configure time)");
#endif
}

int gpu_of_rank(int world_rank) {
  int local = world_rank;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* value = std::getenv(name)) {
      local = std::atoi(value);
      break;
    }
#if FPLAB_WITH_CUDA
  const int count = sim::gpu::device_count();
  return count > 0 ? local % count : 0;
#else
  return local;
#endif
}

void use_gpu(int index) {
#if FPLAB_WITH_CUDA
  sim::gpu::use_device(index);
#else
  (void)index;
#endif
}

}  // namespace fplab::app
