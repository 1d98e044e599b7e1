// frontier: the Frontier CLI. Thin main over server/cli/cli.h (docs/cli.md).
#include "server/cli/cli.h"

int main(int argc, char** argv) { return frontier::RunCli(argc, argv); }
