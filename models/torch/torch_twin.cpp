// The only translation unit that includes LibTorch (its headers take long to compile).
#include "models/torch/torch_twin.hpp"

#include <dlfcn.h>
#include <torch/torch.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "models/algo_noise.hpp"
#include "models/augment.hpp"

namespace fplab::models::torch_twin {
namespace {

enum class Kind { linear, conv2d, batchnorm, relu, maxpool, flatten, global_avg_pool, dropout };

// One layer of the twin, made from fplab's layer i (its index is the dropout key, as ctx.layer).
struct TwinLayer {
  Kind kind = Kind::relu;
  uint64_t index = 0;
  int64_t kernel = 0, stride = 1, padding = 0;  // conv2d
  at::Tensor weight, bias;                      // linear and conv2d; batchnorm: gamma and beta
  at::Tensor running_mean, running_var;         // batchnorm
  double p = 0;                                 // dropout
};

struct Twin {
  std::vector<TwinLayer> layers;
  std::vector<at::Tensor> parameters;  // fplab's order: per layer weight, bias (gamma, beta)
  std::vector<bool> decayed;           // Parameter::weight_decay of each
  std::vector<std::vector<size_t>> fplab_shapes;
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Layers are recognised by their describe() text, the one public statement of a layer's kind and
// hyper-parameters (Conv2d's kernel, stride and padding are not otherwise exposed).
Kind classify(const std::string& d) {
  if (starts_with(d, "linear(")) return Kind::linear;
  if (starts_with(d, "conv2d(")) return Kind::conv2d;
  if (starts_with(d, "batchnorm(")) return Kind::batchnorm;
  if (d == "relu") return Kind::relu;
  if (d == "maxpool(2x2)") return Kind::maxpool;
  if (d == "flatten") return Kind::flatten;
  if (d == "global_avg_pool") return Kind::global_avg_pool;
  if (starts_with(d, "dropout(")) return Kind::dropout;
  throw std::invalid_argument("torch twin: no LibTorch equivalent for layer '" + d + "'");
}

at::Tensor copy_in(const Tensor<float>& t) {
  std::vector<int64_t> sizes(t.shape.begin(), t.shape.end());
  return at::from_blob(const_cast<float*>(t.ptr()), sizes, at::kFloat).clone();
}

at::Device device_of(Device d) { return d == Device::cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU); }

// fplab layout -> LibTorch layout. Linear: (in x out) -> (out x in). Conv2d: (C*kh*kw) x C_out
// -> (C_out, C, kh, kw): the transpose's rows are (c, i, j) in row-major order, as im2col's columns.
at::Tensor to_torch_layout(Kind kind, const Tensor<float>& w, int64_t kernel) {
  const at::Tensor t = copy_in(w);
  if (kind == Kind::linear) return t.t().contiguous();
  const int64_t k = t.size(0), out = t.size(1);
  return t.t().contiguous().reshape({out, k / (kernel * kernel), kernel, kernel});
}

at::Tensor to_fplab_layout(Kind kind, const at::Tensor& w) {
  if (kind == Kind::linear) return w.t().contiguous();
  return w.reshape({w.size(0), -1}).t().contiguous();
}

void append(std::vector<float>& out, const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

Twin make_twin(Model<float>& model, const ModelSpec& spec, at::Device device) {
  Twin twin;
  for (size_t i = 0; i < model.layer_count(); ++i) {
    Layer<float>& layer = model.layer(i);
    const std::string d = layer.describe();
    TwinLayer t;
    t.kind = classify(d);
    t.index = i;
    if (t.kind == Kind::conv2d) {
      size_t cin = 0, cout = 0, kh = 0, kw = 0, stride = 0, pad = 0;
      if (std::sscanf(d.c_str(), "conv2d(%zu->%zu, %zux%zu, stride %zu, pad %zu)", &cin, &cout, &kh, &kw, &stride,
                      &pad) != 6 ||
          kh != kw)
        throw std::invalid_argument("torch twin: cannot read the convolution '" + d + "'");
      t.kernel = static_cast<int64_t>(kh);
      t.stride = static_cast<int64_t>(stride);
      t.padding = static_cast<int64_t>(pad);
    }
    if (t.kind == Kind::dropout) t.p = spec.dropout;
    const auto params = layer.parameters();
    if (t.kind == Kind::linear || t.kind == Kind::conv2d) {
      t.weight = to_torch_layout(t.kind, params.at(0)->value, t.kernel);
      t.bias = copy_in(params.at(1)->value);
    } else if (t.kind == Kind::batchnorm) {
      t.weight = copy_in(params.at(0)->value);
      t.bias = copy_in(params.at(1)->value);
      const auto buffers = layer.buffers();
      t.running_mean = copy_in(*buffers.at(0));
      t.running_var = copy_in(*buffers.at(1));
    } else if (!params.empty()) {
      throw std::invalid_argument("torch twin: unexpected parameters in '" + d + "'");
    }
    for (at::Tensor* x : {&t.weight, &t.bias, &t.running_mean, &t.running_var})
      if (x->defined()) *x = x->to(device);
    if (t.weight.defined()) {
      t.weight.requires_grad_(true);
      t.bias.requires_grad_(true);
      twin.parameters.insert(twin.parameters.end(), {t.weight, t.bias});
      twin.decayed.insert(twin.decayed.end(), {params[0]->weight_decay, params[1]->weight_decay});
      twin.fplab_shapes.insert(twin.fplab_shapes.end(), {params[0]->value.shape, params[1]->value.shape});
    }
    twin.layers.push_back(std::move(t));
  }
  return twin;
}

at::Tensor forward(const Twin& twin, at::Tensor x, bool training, uint64_t algo_seed, uint64_t step) {
  for (const auto& l : twin.layers) {
    switch (l.kind) {
      case Kind::linear:
        x = at::linear(x, l.weight, l.bias);
        break;
      case Kind::conv2d:
        x = at::conv2d(x, l.weight, l.bias, {l.stride, l.stride}, {l.padding, l.padding});
        break;
      case Kind::batchnorm:
        x = at::batch_norm(x, l.weight, l.bias, l.running_mean, l.running_var, training, 0.1, 1e-5, false);
        break;
      case Kind::relu:
        x = at::relu(x);
        break;
      case Kind::maxpool:  // fplab passes spatial sizes below 2 through
        if (x.size(2) >= 2 && x.size(3) >= 2) x = at::max_pool2d(x, {2, 2}, {2, 2});
        break;
      case Kind::flatten:
        x = x.flatten(1);
        break;
      case Kind::global_avg_pool:
        x = x.mean({2, 3});
        break;
      case Kind::dropout:
        if (training && l.p > 0) {  // fplab's own mask (algorithmic noise), applied as fplab does: x * scale
          std::vector<uint8_t> keep(static_cast<size_t>(x.numel()));
          dropout_mask(algo_seed, l.index, step, l.p, keep);
          const float kept = static_cast<float>(1.0 / (1.0 - l.p));
          at::Tensor scale = at::empty(x.sizes(), at::kFloat);
          float* s = scale.data_ptr<float>();
          for (size_t i = 0; i < keep.size(); ++i) s[i] = keep[i] ? kept : 0.0f;
          x = x * scale.to(x.device());
        }
        break;
    }
  }
  return x;
}

// fplab's update (models/optimizer.cpp), one LibTorch elementwise op per fplab operation, in
// fplab's order and fp32, so that equal gradients give equal bits. Scalars are passed as the
// floats fplab uses (LibTorch casts a Scalar to the tensor's type before the op).
class FplabUpdate {
 public:
  FplabUpdate(const OptimizerSpec& spec, const Twin& twin) : spec_(spec), twin_(twin) {
    if (spec.kind != "sgd" && spec.kind != "adam")
      throw std::invalid_argument("torch twin: unknown optimizer '" + spec.kind + "' (known: sgd, adam)");
    for (const auto& p : twin.parameters) {
      first_.push_back(at::zeros_like(p.detach()));
      second_.push_back(at::zeros_like(p.detach()));
    }
  }
  void step(size_t epoch) {
    at::NoGradGuard no_grad;
    ++steps_;
    const float lr = static_cast<float>(spec_.lr_at(epoch));
    for (size_t i = 0; i < twin_.parameters.size(); ++i) {
      at::Tensor w = twin_.parameters[i];
      const float decay = twin_.decayed[i] ? static_cast<float>(spec_.weight_decay) : 0.0f;
      const at::Tensor g = at::add(w.grad(), at::mul(w, decay));
      if (spec_.kind == "sgd") {
        at::Tensor& v = first_[i];
        v.mul_(static_cast<float>(spec_.momentum)).add_(g);
        w.sub_(at::mul(v, lr));
      } else {
        at::Tensor &m = first_[i], &v = second_[i];
        const float b1 = static_cast<float>(spec_.beta1), b2 = static_cast<float>(spec_.beta2);
        const float c1 = static_cast<float>(1 - std::pow(spec_.beta1, static_cast<double>(steps_)));
        const float c2 = static_cast<float>(1 - std::pow(spec_.beta2, static_cast<double>(steps_)));
        m.mul_(b1).add_(at::mul(g, 1.0f - b1));
        v.mul_(b2).add_(at::mul(at::mul(g, 1.0f - b2), g));
        const at::Tensor numerator = at::mul(at::div(m, c1), lr);
        const at::Tensor denominator = at::add(at::sqrt(at::div(v, c2)), static_cast<float>(spec_.eps));
        w.sub_(at::div(numerator, denominator));
      }
    }
  }

 private:
  OptimizerSpec spec_;
  const Twin& twin_;
  std::vector<at::Tensor> first_, second_;  // sgd: velocity; adam: m and v
  uint64_t steps_ = 0;
};

// torch::optim with fplab's hyper-parameters: one group of decayed parameters, one without.
class LibtorchUpdate {
 public:
  LibtorchUpdate(const OptimizerSpec& spec, const Twin& twin) : spec_(spec) {
    std::vector<at::Tensor> decayed, plain;
    for (size_t i = 0; i < twin.parameters.size(); ++i)
      (twin.decayed[i] ? decayed : plain).push_back(twin.parameters[i]);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (int with_decay : {1, 0}) {
      auto& params = with_decay ? decayed : plain;
      if (params.empty()) continue;
      const double wd = with_decay ? spec.weight_decay : 0.0;
      if (spec.kind == "sgd")
        groups.emplace_back(params, std::make_unique<torch::optim::SGDOptions>(
                                        torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).weight_decay(wd)));
      else if (spec.kind == "adam")
        groups.emplace_back(
            params, std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(spec.lr)
                                                                    .betas(std::make_tuple(spec.beta1, spec.beta2))
                                                                    .eps(spec.eps)
                                                                    .weight_decay(wd)));
      else
        throw std::invalid_argument("torch twin: unknown optimizer '" + spec.kind + "' (known: sgd, adam)");
    }
    if (spec.kind == "sgd")
      optimizer_ = std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(spec.lr));
    else
      optimizer_ = std::make_unique<torch::optim::Adam>(groups, torch::optim::AdamOptions(spec.lr));
  }
  void step(size_t epoch) {
    const double lr = spec_.lr_at(epoch);
    for (auto& group : optimizer_->param_groups()) {
      if (spec_.kind == "sgd")
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      else
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    }
    optimizer_->step();
  }

 private:
  OptimizerSpec spec_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

void set_threads(int threads) {
  at::set_num_threads(threads);
  // Debian's LibTorch multiplies through OpenBLAS (pthreads build), whose pool ignores OpenMP's
  // setting: tell it directly when it is loaded.
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(threads);
}

std::string backend(const TwinOptions& options) {
  const int threads = options.threads;
  std::string s = "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                  std::to_string(TORCH_VERSION_PATCH);
  if (options.device == Device::cuda) {
    const long v = at::detail::getCUDAHooks().versionCuDNN();  // 8.9.2: 8902; 9.10.0: 91000
    const long major = v >= 90000 ? v / 10000 : v / 1000, minor = v >= 90000 ? v / 100 % 100 : v / 100 % 10;
    s += ", CUDA, cuBLAS, cuDNN " + std::to_string(major) + "." + std::to_string(minor);
    s += options.tf32_cublas ? ", cuBLAS TF32" : ", cuBLAS fp32";
    s += options.tf32_cudnn ? ", cuDNN TF32" : ", cuDNN fp32";
    s += options.deterministic ? ", deterministic algorithms" : ", default algorithms";
    const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    s += std::string(", CUBLAS_WORKSPACE_CONFIG=") + (workspace ? workspace : "(unset)");
    return s;
  }
  s += ", CPU";
  s += at::hasMKL() ? ", MKL" : (dlsym(RTLD_DEFAULT, "openblas_set_num_threads") ? ", OpenBLAS" : ", BLAS");
  if (at::hasMKLDNN() && at::globalContext().userEnabledMkldnn()) s += ", oneDNN";
  s += ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  return s;
}

std::vector<uint8_t> predict(const Twin& twin, const ImageSet& set, at::Device device, size_t batch = 200) {
  at::NoGradGuard no_grad;
  std::vector<uint8_t> out;
  out.reserve(set.size());
  for (size_t start = 0; start < set.size(); start += batch) {
    const auto n = static_cast<int64_t>(std::min(batch, set.size() - start));
    const at::Tensor x =
        at::from_blob(const_cast<float*>(set.image(start)), {n, set.channels, set.rows, set.cols}, at::kFloat)
            .to(device);
    const at::Tensor labels = forward(twin, x, false, 0, 0).argmax(1).to(at::kCPU).contiguous();
    const int64_t* p = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(p[i]));
  }
  return out;
}

}  // namespace

bool cuda_available(std::string* why) {
  if (!torch::cuda::is_available()) {
    if (why)
      *why = std::string("no CUDA device for LibTorch ") +
             (at::hasCUDA() ? "(built with CUDA; no GPU visible)"
                            : "(this LibTorch is built without CUDA: docs/torch.md, \"On a GPU\")");
    return false;
  }
  return true;
}

std::vector<float> initial_weights(const TrainConfig& config, const Dataset& data) {
  Model<float> model = initial_model(config, data.train);
  std::vector<float> all;
  for (auto* p : model.parameters()) all.insert(all.end(), p->value.data.begin(), p->value.data.end());
  return all;
}

std::vector<ParameterMapping> parameter_mapping(const ModelSpec& spec, const std::vector<size_t>& input_shape) {
  Model<float> model = build_model<float>(spec, input_shape);
  const Twin twin = make_twin(model, spec, at::Device(at::kCPU));
  std::vector<ParameterMapping> out;
  size_t at = 0;
  for (const auto& l : twin.layers) {
    if (!l.weight.defined()) continue;
    const std::string base = "layer " + std::to_string(l.index) + " " + model.layer(l.index).describe();
    const bool bn = l.kind == Kind::batchnorm;
    out.push_back({base + (bn ? " gamma" : " weight"), twin.fplab_shapes[at], l.weight.sizes().vec(), !bn});
    out.push_back({base + (bn ? " beta" : " bias"), twin.fplab_shapes[at + 1], l.bias.sizes().vec(), false});
    at += 2;
  }
  return out;
}

namespace {

TwinResult train_on(const TrainConfig& config, const Dataset& data, const TwinOptions& options) {
  using clock = std::chrono::steady_clock;
  set_threads(options.threads);
  const bool cuda = options.device == Device::cuda;
  const at::Device device = device_of(options.device);
  // Every flag on every call (the CUDA ones are inert on the CPU), so nothing carries over.
  auto& context = at::globalContext();
  context.setDeterministicCuDNN(options.deterministic);
  context.setBenchmarkCuDNN(false);
  context.setAllowTF32CuBLAS(cuda && options.tf32_cublas);
  context.setAllowTF32CuDNN(cuda && options.tf32_cudnn);
  // On the GPU an op without a deterministic form warns (on stderr) instead of stopping the run:
  // whether replicas agree bit for bit is measured, not assumed.
  context.setDeterministicAlgorithms(options.deterministic, cuda);

  const ImageSet& set = data.train;
  const std::vector<size_t> examples = select_training_examples(set.labels, config.selection, config.algo_seed);
  if (examples.empty()) throw DataError("training data", "empty after the subset/imbalance selection");
  const size_t batch = config.batch == 0 ? examples.size() : std::min(config.batch, examples.size());
  const size_t batches = (examples.size() + batch - 1) / batch;

  Model<float> model = initial_model(config, set);
  const Twin twin = make_twin(model, config.model, device);
  std::unique_ptr<FplabUpdate> fplab_update;
  std::unique_ptr<LibtorchUpdate> libtorch_update;
  if (options.update == UpdateRule::fplab)
    fplab_update = std::make_unique<FplabUpdate>(config.optimizer, twin);
  else
    libtorch_update = std::make_unique<LibtorchUpdate>(config.optimizer, twin);

  const uint64_t order_seed = config.order_seed ? config.order_seed : config.algo_seed;

  TwinResult result;
  result.backend = backend(options);
  std::vector<size_t> batch_examples;
  std::vector<float> images(batch * set.image_size());
  std::vector<uint8_t> labels(batch);
  std::vector<at::Tensor> losses;  // this epoch's
  uint64_t step = 0;
  bool done = false;
  for (size_t epoch = 0; epoch < config.epochs && !done; ++epoch) {
    const auto started = clock::now();
    const auto order = epoch_order(examples.size(), order_seed, epoch);
    for (size_t b = 0; b < batches; ++b) {
      const size_t begin = b * batch, n = std::min(batch, examples.size() - begin);
      batch_examples.resize(n);
      for (size_t i = 0; i < n; ++i) batch_examples[i] = examples[order[begin + i]];
      make_batch(set, batch_examples, config.augmentation, config.algo_seed, epoch, data.background(), images.data(),
                 labels.data());
      const auto rows = static_cast<int64_t>(n);
      const at::Tensor x =
          at::from_blob(images.data(), {rows, set.channels, set.rows, set.cols}, at::kFloat).to(device);
      at::Tensor target = at::empty({rows}, at::kLong);
      for (size_t i = 0; i < n; ++i) target.data_ptr<int64_t>()[i] = labels[i];
      target = target.to(device);

      for (const auto& p : twin.parameters) p.mutable_grad().reset();  // fresh gradients, nothing accumulated
      const at::Tensor loss = at::cross_entropy_loss(forward(twin, x, true, config.algo_seed, step), target);
      loss.backward();
      if (fplab_update)
        fplab_update->step(epoch);
      else
        libtorch_update->step(epoch);
      losses.push_back(loss.detach());  // copied once an epoch: no GPU sync per step
      ++step;
      if (options.on_batch) options.on_batch(epoch, b, batches);
      if (options.max_steps != 0 && step >= options.max_steps) {
        done = true;
        break;
      }
    }
    if (cuda) torch::cuda::synchronize();  // the epoch's kernels finished, not only queued
    result.epoch_seconds.push_back(std::chrono::duration<double>(clock::now() - started).count());
    if (!losses.empty()) append(result.losses, at::stack(losses));
    losses.clear();
  }
  result.steps = step;
  for (const auto& l : twin.layers) {
    if (!l.weight.defined()) continue;
    append(result.weights, l.kind == Kind::batchnorm ? l.weight : to_fplab_layout(l.kind, l.weight));
    append(result.weights, l.bias);
    if (l.kind == Kind::batchnorm) {
      append(result.buffers, l.running_mean);
      append(result.buffers, l.running_var);
    }
  }
  if (options.evaluate) {
    result.predictions = predict(twin, data.test, device);
    size_t correct = 0;
    for (size_t i = 0; i < result.predictions.size(); ++i) correct += result.predictions[i] == data.test.labels[i];
    result.test_accuracy = static_cast<double>(correct) / static_cast<double>(result.predictions.size());
  }
  return result;
}

}  // namespace

TwinResult train(const TrainConfig& config, const Dataset& data, const TwinOptions& options) {
  const bool cuda = options.device == Device::cuda;
  std::string why;
  if (cuda && !cuda_available(&why)) throw std::runtime_error("torch twin: " + why);
  try {
    return train_on(config, data, options);
  } catch (const c10::Error& e) {  // what() carries LibTorch's backtrace: keep the message's first line
    const std::string message = e.what_without_backtrace();
    throw std::runtime_error("LibTorch: " + message.substr(0, message.find('\n')));
  }
}

}  // namespace fplab::models::torch_twin
