// The entry function every harness of tests/fuzz defines, the one libFuzzer
// calls (FRONTIER_FUZZ builds) and replay_main.cc calls for each regression
// and seed file (every build). A harness returns 0; a crash, a sanitizer
// report or an escaped exception is a finding.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
