// The estuary CLI as a library so tests can drive it in-process.
#pragma once

namespace estuary {

// Parses argv, runs the subcommand, prints results on stdout and one-line errors on stderr.
// Returns the process exit code.
int RunCli(int argc, char** argv);

}  // namespace estuary
