// Hardware profiles: how one real or hypothetical device adds, per operation kind, in the
// framework's default mode and in its deterministic mode (schema: docs/profiles.md; the shipped
// profiles live in profiles/shipped/, one TOML file each).
//
// Assumptions stated once:
// - a profile only chooses schedules and arithmetic (OpTable); the rounding of a GEMM's *inputs*
//   is part of a schedule only through the tensor-core reducer fused(N,F,INPUT) (docs/profiles.md,
//   "What a profile cannot say"); every accumulation format must be one whose values a float holds
//   (exponent <= 8 bits, fraction <= 23 bits: fp32, tf32, bf16, fp16, e4m3, e5m2, e8m13, ...);
// - the [deterministic] table of every profile draws nothing from the implementation-noise
//   stream (no atomic, no shuffle, no stochastic rounding): the loader rejects one that does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profiles/op_table.hpp"

namespace fplab::profiles {

struct HardwareProfile {
  std::string name;                            // equals the file's stem for the shipped profiles
  std::string description;                     // one line
  std::string path;                            // the file it was read from
  std::map<std::string, int64_t> parallelism;  // sms, warp_size, threads_per_block, ... (descriptive)
  OpTable default_ops;                         // what the framework picks by default
  OpTable deterministic_ops;                   // what its deterministic switch picks
};

// True if the choice draws from the implementation-noise stream: an atomic or shuffle step,
// or stochastic rounding.
bool draws_noise(const OpChoice& choice);
// The operation kinds of a table that draw noise, in OpKind order.
std::vector<OpKind> noisy_ops(const OpTable& table);

// Profiles are found by name along a search path: the caller's folders (e.g. --profiles-dir,
// in order), then the folders of $FPLAB_HW_PROFILES (colon-separated), then the profiles
// shipped in profiles/shipped/, which are compiled into the program (profiles/shipped_hw_profiles.hpp).
// A user's folder may thus hold its own profiles and override a shipped one by name.
std::vector<std::string> hw_profile_search_folders(const std::vector<std::string>& folders = {});

// Reads one profile. Errors (fp::FormatError, one line) name the file, the line and the key.
HardwareProfile load_hw_profile(const std::string& path);
// The same from TOML text; `source` names it in errors and becomes the profile's path (the
// built-in profiles and the fuzz harness use it).
HardwareProfile parse_hw_profile(std::string_view text, const std::string& source);

// Every profile name the search path knows (user folders and shipped), sorted, each once.
std::vector<std::string> hw_profile_names(const std::vector<std::string>& folders = {});

// Whether `text` names a profile file rather than a profile: it contains '/', ends in ".toml"
// or is an existing file.
bool is_hw_profile_path(const std::string& text);

// A path (see is_hw_profile_path) is read as it is; a name is looked up as FOLDER/NAME.toml along
// the search path, then among the shipped profiles, and the file's `name` key must equal NAME.
HardwareProfile find_hw_profile(const std::string& name_or_path, const std::vector<std::string>& folders = {});

}  // namespace fplab::profiles
