// nccl_order: in what order does NCCL's all-reduce sum each element, on this machine's GPUs?
// One process, one communicator over the first R GPUs (ncclCommInitAll), one configuration
// (algorithm, protocol, channels) a run, because NCCL reads its environment once per process.
// For each element type and size it reveals every element's order (reveal/probe_all_reduce: R
// (R - 1) all-reduces of +M, -M and 1s), compares it with the model of NCCL's layout
// (sim/nccl_all_reduce: nccl_ring_layout, tree_chain_order), then all-reduces random buffers and
// compares every output bit for bit with the emulation in the model's order and in the revealed
// one. Prints a table last and appends one JSON line per case (docs/results/nccl.md).
//
//   nccl_order --ranks 8 --algo ring --protocol Simple --channels 4 [--types fp32,bf16]
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "reveal/probe_all_reduce.hpp"
#include "sim/nccl_all_reduce.hpp"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"
#include "tools/gpu/tool_rng.hpp"

using namespace fplab;
using nlohmann::json;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(e));
}

struct ElementType {
  std::string name;
  ncclDataType_t nccl;
  size_t bytes;
  fp::Format format;
};

ElementType element_type(const std::string& name) {
  if (name == "fp32") return {"fp32", ncclFloat32, 4, fp::fp32()};
  if (name == "bf16") return {"bf16", ncclBfloat16, 2, fp::bf16()};
  if (name == "fp16") return {"fp16", ncclFloat16, 2, fp::fp16()};
  throw std::invalid_argument("--types: unknown type '" + name + "' (fp32, bf16 or fp16)");
}

// A value the type holds exactly, as the type's bytes (little-endian, as the GPUs store them).
void store(const ElementType& t, float x, uint8_t* at) {
  const uint64_t bits = t.format.encode(x);
  std::memcpy(at, &bits, t.bytes);
}

float load(const ElementType& t, const uint8_t* at) {
  uint64_t bits = 0;
  std::memcpy(&bits, at, t.bytes);
  return static_cast<float>(t.format.decode(bits));
}

class Communicator {
 public:
  explicit Communicator(int ranks)
      : ranks_(ranks), comms_(static_cast<size_t>(ranks)), streams_(static_cast<size_t>(ranks)) {
    std::vector<int> devices(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) devices[static_cast<size_t>(r)] = r;
    check(ncclCommInitAll(comms_.data(), ranks, devices.data()), "ncclCommInitAll");
    for (int r = 0; r < ranks; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaStreamCreate(&streams_[static_cast<size_t>(r)]), "cudaStreamCreate");
    }
  }
  ~Communicator() {
    for (int r = 0; r < ranks_; ++r) {
      cudaSetDevice(r);
      for (void* p : {send_[r], recv_[r]})
        if (p) cudaFree(p);
      cudaStreamDestroy(streams_[static_cast<size_t>(r)]);
      ncclCommDestroy(comms_[static_cast<size_t>(r)]);
    }
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // The all-reduce of inputs[rank] (floats the type holds exactly); every rank's result must be
  // the same bytes, and rank 0's comes back as floats.
  std::vector<float> all_reduce(const ElementType& t, const std::vector<std::vector<float>>& inputs) {
    const size_t n = inputs[0].size(), bytes = n * t.bytes;
    reserve(bytes);
    std::vector<uint8_t> host(bytes);
    for (int r = 0; r < ranks_; ++r) {
      for (size_t e = 0; e < n; ++e) store(t, inputs[static_cast<size_t>(r)][e], host.data() + e * t.bytes);
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaMemcpy(send_[r], host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ranks_; ++r)
      check(ncclAllReduce(send_[r], recv_[r], n, t.nccl, ncclSum, comms_[static_cast<size_t>(r)],
                          streams_[static_cast<size_t>(r)]),
            "ncclAllReduce");
    check(ncclGroupEnd(), "ncclGroupEnd");
    std::vector<uint8_t> first(bytes), other(bytes);
    for (int r = 0; r < ranks_; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaStreamSynchronize(streams_[static_cast<size_t>(r)]), "cudaStreamSynchronize");
      check(cudaMemcpy(r ? other.data() : first.data(), recv_[r], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      if (r && other != first)
        throw std::runtime_error("rank " + std::to_string(r) + "'s result differs from rank 0's");
    }
    std::vector<float> out(n);
    for (size_t e = 0; e < n; ++e) out[e] = load(t, first.data() + e * t.bytes);
    return out;
  }

 private:
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    for (int r = 0; r < ranks_; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      for (void** p : {&send_[r], &recv_[r]}) {
        if (*p) cudaFree(*p);
        check(cudaMalloc(p, bytes), "cudaMalloc");
      }
    }
    capacity_ = bytes;
  }
  int ranks_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::map<int, void*> send_, recv_;
  size_t capacity_ = 0;
};

std::string order_text(const std::vector<int>& order) {
  std::string s;
  for (int r : order) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    if (comma > at) out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 2, channels = 2, random_runs = 3;
  std::string algo = "ring", protocol = "Simple", types_text = "fp32,bf16", json_path = "nccl_order.jsonl";
  std::vector<size_t> counts = {1000, 100000, 1000000, 5000000};
  uint64_t seed = 1;
  CLI::App app(
      "In what order does NCCL's all-reduce sum each element? Reveals every element's order on the\n"
      "first R GPUs, compares it with fplab's model of NCCL's layout, and all-reduces random buffers\n"
      "to compare every output bit for bit with the emulation. One configuration a run (NCCL reads\n"
      "its environment once); prints SKIPPED with fewer than R GPUs.",
      "nccl_order");
  app.add_option("--ranks", ranks, "GPUs (ranks) of the communicator")->check(CLI::Range(2, 64))->capture_default_str();
  app.add_option("--algo", algo, "NCCL_ALGO: ring or tree")
      ->check(CLI::IsMember({"ring", "tree"}))
      ->capture_default_str();
  app.add_option("--protocol", protocol, "NCCL_PROTO: Simple, LL or LL128")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}))
      ->capture_default_str();
  app.add_option("--channels", channels, "NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--types", types_text, "element types, comma-separated: fp32, bf16, fp16")->capture_default_str();
  app.add_option("--counts", counts, "buffer sizes in elements, a comma list")->delimiter(',')->check(CLI::Range(size_t{1}, size_t{1} << 28));
  app.add_option("--random-runs", random_runs, "random buffers per size")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of the random buffers")->capture_default_str();
  app.add_option("--json", json_path, "JSON lines appended here, one per type and size")->capture_default_str();
  app.footer(
      "Examples:\n"
      "  nccl_order --ranks 2\n"
      "  nccl_order --ranks 8 --algo ring --protocol Simple --channels 4 --counts 1000,1000000\n"
      "  nccl_order --ranks 4 --algo tree --types bf16 --json out/nccl.jsonl\n");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  std::vector<ElementType> types;
  try {
    for (const auto& name : split_list(types_text)) types.push_back(element_type(name));
    for (const auto& t : types)
      if (t.name == "fp16" && ranks > 17)
        throw std::invalid_argument("--types fp16: the probe reveals at most 17 ranks in fp16");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_order: error: %s\n", e.what());
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (devices < ranks) {
    std::printf("SKIPPED: %d rank(s) need %d GPUs; this machine has %d\n", ranks, ranks, devices);
    return 0;
  }
  const std::string date = tools::gpu::utc_now();
  tools::gpu::device_or_skip(&date);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::printf("NCCL %d, %d ranks, NCCL_ALGO=%s NCCL_PROTO=%s, %d channel(s)\n", nccl_version, ranks, algo.c_str(),
              protocol.c_str(), channels);
  // NCCL reads these when the communicator is made. Multicast (NVLS) stays off: it can take the
  // host's GPUs out of service (the device tool's KINDS.md), and the switch's sums are no ring's.
  setenv("NCCL_ALGO", algo == "ring" ? "Ring" : "Tree", 1);
  setenv("NCCL_PROTO", protocol.c_str(), 1);
  setenv("NCCL_MIN_NCHANNELS", std::to_string(channels).c_str(), 1);
  setenv("NCCL_MAX_NCHANNELS", std::to_string(channels).c_str(), 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);

  try {
    Communicator comm(ranks);
    std::ofstream jsonl(json_path, std::ios::app);
    std::vector<std::string> table;
    for (const auto& t : types) {
      for (const size_t n : counts) {
        sim::NcclCall call;
        call.count = n;
        call.element_bytes = t.bytes;
        call.ranks = ranks;
        call.comm_channels = channels;
        call.protocol = sim::parse_nccl_protocol(protocol);
        const auto layout = sim::nccl_ring_layout(call);
        std::vector<int> chain(static_cast<size_t>(ranks));
        for (int r = 0; r < ranks; ++r) chain[static_cast<size_t>(r)] = r;
        const auto model_order = [&](size_t e) {
          return algo == "ring" ? sim::ring_order(layout, e) : sim::tree_chain_order(chain);
        };
        // fp16 cannot hold the usual probe value; 2^15 (ulp 32) still absorbs up to 17 ranks' 1s.
        const float large = t.name == "fp16" ? 0x1p15f : 0.0f;
        const auto revealed = reveal::reveal_all_reduce(
            [&](const std::vector<std::vector<float>>& in) { return comm.all_reduce(t, in); }, ranks, n, large);
        // Orders: the revealed tree of each element against the model's chain.
        std::vector<std::optional<std::vector<int>>> revealed_orders;
        std::vector<std::string> revealed_text;
        for (const auto& tree : revealed.trees) {
          revealed_orders.push_back(sim::chain_order(tree));
          revealed_text.push_back(tree.text());
        }
        size_t orders_match = 0;
        json first_mismatch = nullptr;
        std::map<std::string, size_t> order_counts;
        std::map<std::vector<int>, std::string> model_text;  // few distinct orders: each drawn once
        for (size_t e = 0; e < n; ++e) {
          const auto& text = revealed_text[revealed.tree_of[e]];
          const auto model = model_order(e);
          auto it = model_text.find(model);
          if (it == model_text.end()) it = model_text.emplace(model, sim::chain_tree(model).text()).first;
          if (it->second == text) {
            ++orders_match;
          } else if (first_mismatch.is_null()) {
            first_mismatch = {{"element", e}, {"revealed", text}, {"model", it->second}};
          }
          const auto& order = revealed_orders[revealed.tree_of[e]];
          ++order_counts[order ? order_text(*order) : text];
        }
        // Bits: random buffers, every output against the emulation in either order.
        size_t bits_model = 0, bits_revealed = 0, outputs = 0;
        json first_bits_mismatch = nullptr;
        tools::gpu::ToolRng rng({seed, t.bytes, n, static_cast<uint64_t>(ranks)});
        for (int run = 0; run < random_runs; ++run) {
          std::vector<std::vector<double>> x(static_cast<size_t>(ranks), std::vector<double>(n));
          std::vector<std::vector<float>> xf(static_cast<size_t>(ranks), std::vector<float>(n));
          for (int r = 0; r < ranks; ++r)
            for (size_t e = 0; e < n; ++e) {
              // Mixed magnitudes, so that the order shows in the last bits.
              const double v = rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(12)) - 6);
              const double held = fp::round_double(v, t.format, fp::RoundingOptions(fp::Mode::rne)).value;
              x[static_cast<size_t>(r)][e] = held;
              xf[static_cast<size_t>(r)][e] = static_cast<float>(held);
            }
          const auto got = comm.all_reduce(t, xf);
          for (size_t e = 0; e < n; ++e) {
            ++outputs;
            const auto model = model_order(e);
            const double want = sim::fold_in_order(x, e, model, t.format);
            if (static_cast<float>(want) == got[e]) {
              ++bits_model;
            } else if (first_bits_mismatch.is_null()) {
              first_bits_mismatch = {{"element", e}, {"got", got[e]}, {"model", want}};
            }
            const auto& order = revealed_orders[revealed.tree_of[e]];
            if (order && static_cast<float>(sim::fold_in_order(x, e, *order, t.format)) == got[e]) ++bits_revealed;
          }
        }
        json orders = json::array();
        for (const auto& [order, elements] : order_counts) {
          if (orders.size() >= 16) break;
          orders.push_back({{"order", order}, {"elements", elements}});
        }
        json line = {{"date", date},
                     {"nccl_version", nccl_version},
                     {"ranks", ranks},
                     {"algo", algo},
                     {"protocol", protocol},
                     {"channels", channels},
                     {"type", t.name},
                     {"count", n},
                     {"calls", revealed.calls},
                     {"distinct_orders", order_counts.size()},
                     {"orders_match_model", orders_match},
                     {"first_order_mismatch", first_mismatch},
                     {"outputs", outputs},
                     {"bits_equal_model", bits_model},
                     {"bits_equal_revealed", bits_revealed},
                     {"first_bits_mismatch", first_bits_mismatch},
                     {"orders", orders},
                     {"model_channels", layout.channels.size()}};
        jsonl << line.dump() << "\n";
        char row[256];
        std::snprintf(row, sizeof row, "| %d | %s | %s | %d | %s | %zu | %zu | %zu/%zu | %zu/%zu | %zu/%zu |", ranks,
                      algo.c_str(), protocol.c_str(), channels, t.name.c_str(), n, order_counts.size(), orders_match, n,
                      bits_model, outputs, bits_revealed, outputs);
        table.push_back(row);
        std::printf("%s\n", row);
        std::fflush(stdout);
      }
    }
    std::printf(
        "\n| ranks | algo | proto | channels | type | elements | orders | orders = model | bits = model "
        "emulation | bits = revealed-order emulation |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& row : table) std::printf("%s\n", row.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_order: %s\n", e.what());
    return 1;
  }
  return 0;
}
