// The translation unit of frontier_torch_pch, the target whose precompiled
// <torch/torch.h> every LibTorch target of the build reuses
// (frontier_compile_with_torch in worker/trial/CMakeLists.txt). It holds no code:
// CMake compiles the header itself and force-includes it here.
