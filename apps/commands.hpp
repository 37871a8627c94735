// The subcommands of fplab. Each registers itself on the app and sets `run` to the function
// that executes it once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace fplab::app {

using Runner = std::function<int()>;

void add_round_command(CLI::App& app, Runner& run);
void add_sum_command(CLI::App& app, Runner& run);
void add_reduce_command(CLI::App& app, Runner& run);
void add_dot_command(CLI::App& app, Runner& run);
void add_tree_command(CLI::App& app, Runner& run);
void add_explore_command(CLI::App& app, Runner& run);
void add_train_command(CLI::App& app, Runner& run);
void add_run_command(CLI::App& app, Runner& run, int argc, char** argv);
void add_diverge_command(CLI::App& app, Runner& run);
void add_profile_command(CLI::App& app, Runner& run);
void add_validate_command(CLI::App& app, Runner& run);
void add_reveal_command(CLI::App& app, Runner& run);
void add_serve_command(CLI::App& app, Runner& run);

}  // namespace fplab::app
