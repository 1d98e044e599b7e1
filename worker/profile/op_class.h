// Operator classes of a profile: what kind of work a LibTorch operator does
// and what that kind of work is limited by (docs/profiling.md). Torch-free:
// operators are known by name only.
#pragma once

#include <string>

namespace frontier {

// Operator classes of the profile summary ("compute", "elementwise",
// "normalization", "reduction", "data_movement", "view", "autograd",
// "other") by LibTorch operator name, e.g. "aten::addmm" -> "compute".
std::string OperatorClass(const std::string& op_name);

// What an operator class is limited by: "compute" (compute), "memory"
// (elementwise, normalization, reduction, data_movement) or "overhead" (view,
// autograd, other: framework bookkeeping that moves no data).
std::string BoundClass(const std::string& op_class);

}  // namespace frontier
