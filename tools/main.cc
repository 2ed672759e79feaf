// The `estuary` command-line program. Exit codes: 0 success, 2 bad input or usage (one line
// naming the file, line and field, or the flag), 1 internal failure.
#include "tools/cli.h"

int main(int argc, char** argv) { return estuary::RunCli(argc, argv); }
