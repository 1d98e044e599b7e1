// frontier: the Frontier CLI. See server/cli.h.
#include "server/cli/cli.h"

int main(int argc, char** argv) { return frontier::RunCli(argc, argv); }
