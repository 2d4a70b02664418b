// cclo-run: a cclod client process for the demo and the e2e tests (see client/run/).
#include <iostream>

#include "client/run/commands.h"

int main(int argc, char** argv) { return cclo::run::Main(argc, argv, std::cout, std::cerr); }
