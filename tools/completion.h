// `estuary completion bash`: a bash completion script generated from the command line's own
// definition (the CLI11 App tree), so it never lags behind the commands and flags.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace estuary {

// The bash completion script of `app` (named by app.get_name(), e.g. "estuary"): after the
// program's name and each (sub)command it offers the subcommands and the flags of that command;
// after a flag that takes a value, and for positional arguments, file names. Source it
// (`source <(estuary completion bash)`) or install it as
// /usr/share/bash-completion/completions/estuary. Deterministic: commands and flags in the order
// they were defined.
std::string BashCompletion(const CLI::App& app);

}  // namespace estuary
