// gpu_mma_validate --replay: the comparison redone on a samples file without a GPU (the inputs
// re-created from their seeds).

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

// ---- replay of saved samples, without a GPU

int replay(const Options& o) {
  std::ifstream in(o.replay_path, std::ios::binary);
  char magic[10];
  if (!in.read(magic, 10) || std::memcmp(magic, kSamplesMagic, 10) != 0) {
    std::fprintf(stderr, "gpu_mma_validate: %s is not a samples file\n", o.replay_path.c_str());
    return 2;
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Row> rows;
  json out = {{"replay", o.replay_path}, {"rows", json::array()}};
  int32_t head[4];
  while (in.read(reinterpret_cast<char*>(head), sizeof head)) {
    const auto path = static_cast<MmaPath>(head[0]);
    const auto input = static_cast<MmaInput>(head[1]);
    const size_t si = head[2], tiles = head[3];
    const MmaTiles t = make_tiles(path, input, si, 0, tiles, threads);
    std::vector<float> d(tiles * t.rows * 8);
    in.read(reinterpret_cast<char*>(d.data()), d.size() * sizeof(float));
    if (std::find(o.inputs.begin(), o.inputs.end(), input) == o.inputs.end()) continue;
    const std::vector<Candidate> cands = candidates(input, path);
    Row row{path, input, si, t.k, tiles, check(input, t, d, 0, tiles, cands, threads)};
    std::printf("%s %s %-26s bit-identical %s\n", to_string(input), to_string(path), kSets[si].name.c_str(),
                percent(row.tally.identical, row.tally.outputs).c_str());
    print_classes(row, cands);
    out["rows"].push_back(row_json(row, cands));
    rows.push_back(std::move(row));
  }
  for (MmaInput input : o.inputs)
    for (MmaPath path : kPaths) print_variants(rows, path, input, candidates(input, path));
  print_table(rows);
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace fplab::tools::gpu::mma
