#include "experiments/replica_file.hpp"

#include <filesystem>
#include <span>

#include "models/checkpoint_io.hpp"
#include "util/file_name.hpp"
#include "util/sha256.hpp"
#include "util/whole_file.hpp"

namespace fplab::experiments {

std::string replica_path(const std::string& out, const std::string& profile, Variant variant, size_t replica) {
  std::string name = variant_name(variant);
  for (char& c : name)
    if (c == '+') c = '_';
  return out + "/replicas/" + util::safe_file_stem(profile) + "." + name + "." + std::to_string(replica) + ".ckpt";
}

std::vector<uint64_t> replica_fingerprint(const models::TrainConfig& c, std::string_view source) {
  // Without a source the text is the config's alone: files of earlier `fplab run`s still match.
  std::string text = c.fingerprint();
  if (!source.empty()) text += " source=" + std::string(source);
  const std::string h = util::sha256_hex(text);
  std::vector<uint64_t> words(4);
  for (size_t i = 0; i < 4; ++i) words[i] = std::stoull(h.substr(16 * i, 16), nullptr, 16);
  return words;
}

void save_replica(const std::string& path, const ReplicaRecord& r, const std::vector<uint64_t>& fingerprint) {
  util::write_file_atomically(path, replica_bytes(r, fingerprint));
}

std::vector<uint8_t> replica_bytes(const ReplicaRecord& r, const std::vector<uint64_t>& fingerprint) {
  models::CheckpointWriter w;
  w.add("fingerprint", std::span<const uint64_t>(fingerprint));
  std::vector<uint64_t> predictions(r.predictions.begin(), r.predictions.end());
  w.add("predictions", std::span<const uint64_t>(predictions));
  w.add("weights", std::span<const float>(r.weights));
  w.add("buffers", std::span<const float>(r.buffers));
  const std::vector<double> scalars = {r.test_accuracy, r.train_loss, r.seconds};
  w.add("scalars", std::span<const double>(scalars));
  const std::vector<uint64_t> seeds = {r.algo_seed, r.impl_seed};
  w.add("seeds", std::span<const uint64_t>(seeds));
  return w.bytes();
}

bool load_replica(const std::string& path, const std::vector<uint64_t>& fingerprint, ReplicaRecord& r) {
  if (!std::filesystem::exists(path)) return false;
  return replica_from_bytes(util::read_file(path), path, fingerprint, r);
}

bool replica_from_bytes(std::span<const uint8_t> bytes, const std::string& source,
                        const std::vector<uint64_t>& fingerprint, ReplicaRecord& r) {
  const auto reader = models::CheckpointReader::parse(bytes, source);
  const auto stored = reader.u64("fingerprint");
  if (std::vector<uint64_t>(stored.begin(), stored.end()) != fingerprint) return false;
  const auto p = reader.u64("predictions");
  r.predictions.assign(p.begin(), p.end());
  const auto w = reader.f32("weights"), b = reader.f32("buffers");
  r.weights.assign(w.begin(), w.end());
  r.buffers.assign(b.begin(), b.end());
  const auto s = reader.f64("scalars");
  r.test_accuracy = s[0];
  r.train_loss = s[1];
  r.seconds = s[2];
  const auto seeds = reader.u64("seeds");
  r.algo_seed = seeds[0];
  r.impl_seed = seeds[1];
  r.weights_sha256 = weights_sha256(r.weights, r.buffers);
  r.predictions_sha256 = util::sha256_hex(r.predictions.data(), r.predictions.size());
  return true;
}

std::string weights_sha256(const std::vector<float>& weights, const std::vector<float>& buffers) {
  util::Sha256 h;
  // An empty vector's data() may be null, which Sha256::update must not memcpy from (UBSan).
  if (!weights.empty()) h.update(weights.data(), weights.size() * sizeof(float));
  if (!buffers.empty()) h.update(buffers.data(), buffers.size() * sizeof(float));
  return h.hex_digest();
}

}  // namespace fplab::experiments
