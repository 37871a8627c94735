// fplab: the command line. Thin by design: it parses and calls into the libraries.
#include <cctype>
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "fp/format.hpp"
#include "sim/schedule.hpp"
#include "util/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fplab: how the order and format in which hardware adds numbers changes the result"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fplab " + fplab::util::version(), "print the fplab version and exit");
  app.footer(
      // Example lines are whole shell commands (explanations are # comments), so that they run
      // when pasted; tests/cli/test_cli.py runs every one.
      "Examples:\n"
      "  fplab round 0.1 --format bf16 --mode all      # 0.1 in bf16 under every rounding mode\n"
      "  fplab sum 1e8 1 -1e8 1 --format fp32           # a sum whose value depends on the order\n"
      "  fplab reduce --schedule 'cuda-naive-sum(256,64)' --gen normal:100000    # a GPU-like order\n"
      "  fplab tree --schedule 'contig(4):seq | all:shfl_down' --n 16 --svg t.svg    # draw it\n"
      "Run 'fplab COMMAND --help' for a command's options.");
  fplab::app::Runner run;
  fplab::app::add_round_command(app, run);
  fplab::app::add_sum_command(app, run);
  fplab::app::add_reduce_command(app, run);
  fplab::app::add_dot_command(app, run);
  fplab::app::add_tree_command(app, run);
  fplab::app::add_explore_command(app, run);
  fplab::app::add_train_command(app, run);
  fplab::app::add_run_command(app, run, argc, argv);
  fplab::app::add_diverge_command(app, run);
  fplab::app::add_profile_command(app, run);
  fplab::app::add_validate_command(app, run);
  fplab::app::add_reveal_command(app, run);
  fplab::app::add_serve_command(app, run);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "fplab: error: unknown command '" << fplab::app::one_line(argv[1]) << "' (known: " << names << ")\n";
      return 2;
    }
  }
  // CLI11 reads "-nan" and "-inf" as clusters of short options (it knows "-0.5" is a number);
  // a leading space makes them values, and number parsing ignores it.
  std::vector<std::string> spaced(argv, argv + argc);
  std::vector<char*> arguments;
  for (std::string& a : spaced) {
    std::string lower = a;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "-nan" || lower == "-inf" || lower == "-infinity") a.insert(0, " ");
    arguments.push_back(a.data());
  }
  try {
    app.parse(argc, arguments.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "fplab: error: " << fplab::app::one_line(e.what()) << " (see fplab --help)\n";
    return 2;
  }
  try {
    return run();
  } catch (const fplab::app::UsageError& e) {
    std::cerr << "fplab: error: " << fplab::app::one_line(e.what()) << '\n';
  } catch (const fplab::sim::ScheduleError& e) {
    std::cerr << "fplab: error: " << fplab::app::one_line(e.what()) << '\n';
  } catch (const fplab::fp::FormatError& e) {
    std::cerr << "fplab: error: " << fplab::app::one_line(e.what()) << '\n';
  } catch (const std::exception& e) {
    std::cerr << "fplab: error: " << fplab::app::one_line(e.what()) << '\n';
  }
  return 2;
}
