// ccloctl: the operator's command line for cclod (see client/ccloctl/commands.h).
#include <iostream>

#include "client/ccloctl/commands.h"

int main(int argc, char** argv) { return cclo::ccloctl::Main(argc, argv, std::cout, std::cerr); }
