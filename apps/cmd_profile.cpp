// fplab profile: the hardware profiles (profiles/shipped/*.toml, docs/profiles.md): list them, or show
// one's schedules and arithmetic per operation in default and deterministic mode.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/schedule.hpp"

namespace fplab::app {
namespace {

struct ProfileArgs {
  std::string name;
  std::vector<std::string> profiles_dir;
  bool json = false;
};

std::string join(const std::vector<profiles::OpKind>& ops) {
  std::string s;
  for (auto k : ops) s += (s.empty() ? "" : ", ") + std::string(profiles::op_kind_name(k));
  return s;
}

nlohmann::json choice_json(profiles::OpKind k, const profiles::OpChoice& c) {
  return {{"op", profiles::op_kind_name(k)},
          {"schedule", sim::to_string(c.schedule)},
          {"arithmetic", c.arithmetic.to_string()},
          {"format", c.arithmetic.format.name},
          {"mode", fp::mode_name(c.arithmetic.mode)},
          {"products", sim::products_name(c.arithmetic.products)},
          {"flush_subnormals", c.arithmetic.flush_subnormals},
          {"saturate", c.arithmetic.saturate},
          {"nondeterministic", profiles::draws_noise(c)}};
}

nlohmann::json mode_json(const profiles::OpTable& table) {
  nlohmann::json ops = nlohmann::json::array(), layers = nlohmann::json::array();
  for (auto k : profiles::all_op_kinds) ops.push_back(choice_json(k, table[k]));
  for (const auto& rule : table.layer_rules) {
    nlohmann::json rule_ops = nlohmann::json::array();
    for (auto k : profiles::all_op_kinds)
      if (const auto& c = rule.ops[static_cast<size_t>(k)]) rule_ops.push_back(choice_json(k, *c));
    nlohmann::json entry = {{"match", rule.match.describe()}, {"ops", rule_ops}};
    if (rule.conv_wgrad) entry["conv_wgrad"] = profiles::conv_wgrad_name(*rule.conv_wgrad);
    if (rule.batch_norm) entry["batch_norm"] = profiles::batch_norm_form_name(*rule.batch_norm);
    layers.push_back(std::move(entry));
  }
  nlohmann::json noisy = nlohmann::json::array();
  for (auto k : profiles::noisy_ops(table)) noisy.push_back(profiles::op_kind_name(k));
  return {{"deterministic", noisy.empty()},
          {"nondeterministic_ops", noisy},
          {"ops", ops},
          {"conv_dgrad", profiles::conv_dgrad_name(table.conv_dgrad)},
          {"layers", layers}};
}

int run_list(const ProfileArgs& args) {
  std::vector<profiles::HardwareProfile> profiles;
  for (const auto& name : profiles::hw_profile_names(args.profiles_dir))
    profiles.push_back(profiles::find_hw_profile(name, args.profiles_dir));
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : profiles) list.push_back({{"name", p.name}, {"description", p.description}, {"path", p.path}});
    print_json({{"profiles", list}});
    return 0;
  }
  int width = 12;  // the name column: as wide as the longest name
  for (const auto& p : profiles) width = std::max(width, static_cast<int>(p.name.size()));
  std::printf("%-*s %-11s %s\n", width, "profile", "IMPL noise", "description");
  for (const auto& p : profiles)
    std::printf("%-*s %-11s %s\n", width, p.name.c_str(), profiles::noisy_ops(p.default_ops).empty() ? "none" : "yes",
                p.description.c_str());
  const auto built_in =
      std::count_if(profiles.begin(), profiles.end(), [](const auto& p) { return p.path.ends_with("(built in)"); });
  std::printf("(%zu profiles: %zu built in, %zu from your folders; 'fplab profile show NAME' for the schedules)\n",
              profiles.size(), static_cast<size_t>(built_in), profiles.size() - static_cast<size_t>(built_in));
  return 0;
}

void print_choice(const std::string& name, const profiles::OpChoice& c) {
  std::printf("  %-10s %-16s %s%s\n", name.c_str(), c.arithmetic.to_string().c_str(),
              sim::to_string(c.schedule).c_str(), profiles::draws_noise(c) ? "   [noise]" : "");
}

void print_mode(const char* mode, const profiles::OpTable& table) {
  const auto noisy = profiles::noisy_ops(table);
  std::printf("\n%s mode: %s\n", mode,
              noisy.empty() ? "deterministic" : ("nondeterministic (" + join(noisy) + ")").c_str());
  for (auto k : profiles::all_op_kinds) print_choice(std::string(profiles::op_kind_name(k)), table[k]);
  if (table.conv_dgrad != profiles::ConvDgrad::col2im)
    std::printf("  convolutions' input gradients: %s\n", std::string(profiles::conv_dgrad_name(table.conv_dgrad)).c_str());
  for (const auto& rule : table.layer_rules) {
    std::printf("  in layers %s:\n", rule.match.describe().c_str());
    if (rule.conv_wgrad == profiles::ConvWgrad::winograd)
      std::printf(
          "    weight gradient by cuDNN's Winograd F(4x4, 3x3) transforms; wgrad orders the 36 sums over (image, "
          "tile)\n");
    if (rule.batch_norm == profiles::BatchNormForm::cudnn)
      std::printf("    batch norm in training in cuDNN's arithmetic (its singleread kernels' formulas, the GPU's rsqrt)\n");
    for (auto k : profiles::all_op_kinds)
      if (const auto& c = rule.ops[static_cast<size_t>(k)])
        print_choice("  " + std::string(profiles::op_kind_name(k)), *c);
  }
}

int run_show(const ProfileArgs& args) {
  const auto p = profiles::find_hw_profile(args.name, args.profiles_dir);
  if (args.json) {
    nlohmann::json parallelism = nlohmann::json::object();
    for (const auto& [k, v] : p.parallelism) parallelism[k] = v;
    print_json({{"name", p.name},
                {"description", p.description},
                {"path", p.path},
                {"parallelism", parallelism},
                {"default", mode_json(p.default_ops)},
                {"deterministic", mode_json(p.deterministic_ops)}});
    return 0;
  }
  std::printf("%s: %s\n(%s)\n", p.name.c_str(), p.description.c_str(), p.path.c_str());
  std::string par;
  for (const auto& [k, v] : p.parallelism) par += (par.empty() ? "" : ", ") + k + " " + std::to_string(v);
  std::printf("parallelism: %s\n", par.empty() ? "(none given)" : par.c_str());
  print_mode("default", p.default_ops);
  print_mode("deterministic", p.deterministic_ops);
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, Runner& run) {
  CLI::App* cmd = app.add_subcommand("profile", "List the hardware profiles, or show one's schedules per operation");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  fplab profile list\n"
      "  fplab profile list --json\n"
      "  fplab profile show v100\n"
      "  fplab profile show tpu-v3 --json\n"
      "  fplab profile show profiles/shipped/v100.toml    # any profile file (schema: docs/profiles.md)\n"
      "Profiles are found by name in --profiles-dir folders, then $FPLAB_HW_PROFILES (FOLDER:FOLDER...), then\n"
      "the shipped ones (profiles/shipped/, built into fplab); a path to a .toml file always works.");

  auto list_args = std::make_shared<ProfileArgs>();
  CLI::App* list =
      cmd->add_subcommand("list", "List the profiles: name, whether default mode has IMPL noise, description");
  list->add_flag("--json", list_args->json, "print {\"profiles\":[{\"name\":...,\"description\":...}, ...]}");
  add_profiles_dir_option(list, list_args->profiles_dir);
  list->footer("Examples:\n  fplab profile list\n  fplab profile list --json --profiles-dir profiles/shipped");
  list->callback([&run, list_args] { run = [list_args] { return run_list(*list_args); }; });

  auto show_args = std::make_shared<ProfileArgs>();
  CLI::App* show = cmd->add_subcommand("show", "Every operation's schedule (canonical) and arithmetic, in both modes");
  show->add_option("name", show_args->name, "profile name (see 'fplab profile list') or path to a .toml file")
      ->required();
  show->add_flag("--json", show_args->json,
                 "print JSON: parallelism, and per mode the ops and whether it is deterministic");
  add_profiles_dir_option(show, show_args->profiles_dir);
  show->footer(
      "Examples:\n  fplab profile show v100\n  fplab profile show h100-bf16 --json\n"
      "  fplab profile show profiles/shipped/h100.toml");
  show->callback([&run, show_args] { run = [show_args] { return run_show(*show_args); }; });
}

}  // namespace fplab::app
