// An experiment's recipe as recorded with its results: every setting of the TOML file as it was
// read (defaults filled in), so that summary.json and the reports say exactly what was trained.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "experiments/experiment.hpp"

namespace fplab::experiments {

// {"data":{…}, "model":{…}, "training":{…}, "run":{…}}: the TOML file's sections and keys.
nlohmann::json recipe_json(const Experiment& experiment);

// One sentence for the reports: model, epochs, batch, optimizer, data, replicas, format.
std::string recipe_text(const Experiment& experiment);

}  // namespace fplab::experiments
