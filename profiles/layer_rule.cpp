#include "profiles/layer_rule.hpp"

namespace fplab::profiles {

std::string_view layer_kind_name(LayerShape::Kind kind) {
  return kind == LayerShape::Kind::conv ? "conv" : kind == LayerShape::Kind::linear ? "linear" : "bn";
}

std::string LayerShape::describe() const {
  const std::string features = std::to_string(in) + "->" + std::to_string(out);
  if (kind == Kind::linear) return "linear(" + features + ")";
  if (kind == Kind::batch_norm)
    return "batch_norm(" + std::to_string(in) + ") at " + std::to_string(height) + " pixels, batch " + std::to_string(batch);
  return "conv(" + features + ", " + std::to_string(kernel) + "x" + std::to_string(kernel) + ", stride " +
         std::to_string(stride) + ") at " + std::to_string(height) + " pixels";
}

std::string_view conv_wgrad_name(ConvWgrad form) { return form == ConvWgrad::winograd ? "winograd" : "gemm"; }

std::string_view batch_norm_form_name(BatchNormForm form) {
  switch (form) {
    case BatchNormForm::cudnn:
      return "cudnn";
    case BatchNormForm::cudnn_nchw:
      return "cudnn-nchw";
    case BatchNormForm::cudnn_nchw_backward:
      return "cudnn-nchw-backward";
    case BatchNormForm::fplab:
      break;
  }
  return "fplab";
}

bool LayerMatch::matches(const LayerShape& layer) const {
  const auto agrees = [](const std::optional<size_t>& want, size_t have) { return !want || *want == have; };
  return kind == layer.kind && agrees(in, layer.in) && agrees(out, layer.out) && agrees(kernel, layer.kernel) &&
         agrees(stride, layer.stride) && agrees(height, layer.height) && agrees(batch, layer.batch);
}

std::string LayerMatch::describe() const {
  std::string s(layer_kind_name(kind));
  const auto field = [&s](const char* name, const std::optional<size_t>& value) {
    if (value) s += std::string(" ") + name + "=" + std::to_string(*value);
  };
  field("in", in);
  field("out", out);
  field("kernel", kernel);
  field("stride", stride);
  field("height", height);
  field("batch", batch);
  return s;
}

}  // namespace fplab::profiles
