// The one place doctest's main() is generated; every test binary links this object.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
