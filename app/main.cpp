// kvscope: no arguments opens the GUI; subcommands (generate, inspect, bench) run headless.
#include "app/cli/cli.h"

int main(int argc, char** argv) { return kvs::app::run_main(argc, argv); }
