// Public view of k3::Error and exit_code_for() (defined in engine/util/error.h), so that code
// outside the engine (the daemon) can catch load errors without including engine internals.
#pragma once
#include "../../util/error.h"
