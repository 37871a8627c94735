#include "sim/tensor_core_models.hpp"

namespace fplab::sim {
namespace {

using In = Reducer::Input;

// N and F per MMA-Sim (arch_accum_fractional_bits: Volta 23, Ampere 24, Hopper 25; Ampere splits
// k16 fp16/bf16 and k8 tf32 mma into two halves; Hopper fuses the whole instruction; Hopper fp8
// keeps 13 fraction bits and truncates the fp32 result to 13), agreeing with the extra-bit and
// FMA-width probes of Fasi et al. 2021 and FTTN 2024 (docs/tensor-cores.md).
constexpr TensorCoreModel kModels[] = {
    {"tc-v100", 4, 23, In::fp16, "fp32",
     "V100 tensor core, fp16 inputs: 4 products + accumulator fused, 23 fraction bits kept"},
    {"tc-turing-unconverted", 4, 23, In::none, "fp32",
     "Volta/Turing tensor core fed its values as they are (no fp16 conversion: without loss scaling, fp16 would "
     "flush most weight-gradient factors)"},
    {"tc-a100", 8, 24, In::fp16, "fp32",
     "A100 tensor core, fp16 inputs: 8 products + accumulator fused, 24 fraction bits kept"},
    {"tc-a100-bf16", 8, 24, In::bf16, "fp32",
     "A100 tensor core, bf16 inputs: 8 products per fused step, 24 fraction bits"},
    {"tc-a100-tf32", 4, 24, In::tf32, "fp32",
     "A100 tensor core, tf32 inputs (truncated): 4 products per fused step (k8 split in halves), 24 fraction bits"},
    {"tc-h100-tf32", 8, 25, In::tf32, "fp32",
     "H100 mma/wgmma, tf32 inputs: 8 products per fused step, 25 fraction bits (inputs truncated to tf32)"},
    {"tc-h100-tf32-rne", 8, 25, In::tf32rne, "fp32",
     "H100 TF32 GEMM as cuBLAS and most cuDNN kernels run it: factors rounded to tf32 (nearest even), then tc-h100-tf32"},
    {"tc-h100-tf32-rna", 8, 25, In::tf32rna, "fp32",
     "H100 TF32 GEMM as some cuDNN convolution kernels run it: factors rounded to tf32 (ties away), then tc-h100-tf32"},
    {"tc-h100-bf16", 16, 25, In::bf16, "fp32",
     "H100 mma/wgmma, bf16 inputs: 16 products per fused step, 25 fraction bits"},
    {"tc-h100-fp16", 16, 25, In::fp16, "fp32",
     "H100 mma/wgmma, fp16 inputs: 16 products per fused step, 25 fraction bits"},
    {"tc-h100-fp8", 32, 13, In::e4m3, "e8m13",
     "H100 wgmma, fp8 inputs: 32 products per fused step, 13 fraction bits (MMA-Sim; use --format e8m13 for its "
     "13-bit accumulator)"},
};

}  // namespace

std::span<const TensorCoreModel> tensor_core_models() { return kModels; }

const TensorCoreModel* find_tensor_core_model(std::string_view name) {
  for (const auto& m : kModels)
    if (m.name == name) return &m;
  return nullptr;
}

std::string tensor_core_model_list() {
  std::string list;
  for (const auto& m : kModels) list += (list.empty() ? "" : ", ") + std::string(m.name);
  return list;
}

Reducer fused_reducer(const TensorCoreModel& model) {
  Reducer r{Reducer::Kind::fused};
  r.fused_products = model.products;
  r.fused_fraction_bits = model.fraction_bits;
  r.fused_input = model.input;
  return r;
}

}  // namespace fplab::sim
