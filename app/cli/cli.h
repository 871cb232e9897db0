#pragma once
// The kvscope command line: `kvscope` alone opens the GUI; subcommands run headless on
// the same engine.
namespace kvs::app {

int run_main(int argc, char** argv);

}  // namespace kvs::app
