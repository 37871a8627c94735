// One finished replica on disk: out/replicas/PROFILE.VARIANT.I.ckpt, written atomically, holding
// its predictions, weights, buffers, scalars and seeds under a fingerprint of the training that
// made it. A resumed run (`fplab run --resume`, fplab.torch.experiment(resume=True)) reuses a file
// only when its fingerprint matches: another recipe's replica is trained again.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "experiments/runner.hpp"
#include "models/trainer.hpp"

namespace fplab::experiments {

// out/replicas/<safe stem of profile>.<variant, '+' as '_'>.<replica>.ckpt: user text never
// leaves the folder (util::safe_file_stem).
std::string replica_path(const std::string& out_dir, const std::string& profile, Variant variant, size_t replica);

// The SHA-256 of the training's fingerprint (models::TrainConfig::fingerprint) as four words;
// `source`, when not empty, names what the config cannot (fplab.torch: the user's model and data).
std::vector<uint64_t> replica_fingerprint(const models::TrainConfig& config, std::string_view source = {});

// Writes `record`'s results (not its profile, variant or index: the path holds them) atomically.
void save_replica(const std::string& path, const ReplicaRecord& record, const std::vector<uint64_t>& fingerprint);
// The same file's bytes: what another rank of a distributed run receives (replica_exchange.hpp).
std::vector<uint8_t> replica_bytes(const ReplicaRecord& record, const std::vector<uint64_t>& fingerprint);

// Fills `record` from `path` (its SHA-256s recomputed) if the file is there and was written under
// `fingerprint`; false otherwise.
bool load_replica(const std::string& path, const std::vector<uint64_t>& fingerprint, ReplicaRecord& record);
// The same from a file's bytes (`source` names them in errors; a damaged file throws).
bool replica_from_bytes(std::span<const uint8_t> bytes, const std::string& source,
                        const std::vector<uint64_t>& fingerprint, ReplicaRecord& record);

// The SHA-256 of the weights followed by the buffers, as models::train computes weights_sha256.
std::string weights_sha256(const std::vector<float>& weights, const std::vector<float>& buffers);

}  // namespace fplab::experiments
