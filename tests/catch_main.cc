// The Catch2 (v2) main shared by all unit-test binaries.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
