#include "cmd/cli.hpp"

int main(int argc, char** argv) { return gpupool::cmd::main(argc, argv); }
