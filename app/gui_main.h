#pragma once
namespace kvs::app {
// Opens the desktop program with the default (or last) model; without a display, says
// so and points to the headless subcommands.
int run_gui(int argc, char** argv);
}  // namespace kvs::app
