// The Catch2 (v2) main shared by all unit-test binaries: a filter that matches nothing fails.
#define CATCH_CONFIG_RUNNER
#include "tests/catch_session.h"

int main(int argc, char** argv) { return lattice::testing::run_catch_session(argc, argv); }
