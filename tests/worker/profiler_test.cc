// Tests of worker/profiler.h (being written).
#include <gtest/gtest.h>

#include "worker/profiler.h"
