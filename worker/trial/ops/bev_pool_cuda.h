// Launchers of the CUDA kernels of the fused BEV pooling operator
// (bev_pool.h). Raw pointers and a stream only, so the .cu file compiles with
// nvcc alone, without LibTorch's CUDA headers. Float32 features, int64 plan.
// Built only with -DFRONTIER_WITH_CUDA_OPS=ON.
#pragma once

#include <cstdint>

namespace frontier::bev {

// out (B, cells, C) must be zeroed by the caller; intervals write their cell.
void BevPoolForwardCuda(const float* x, const int64_t* ranks, const int64_t* interval_starts,
                        const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                        int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* out,
                        void* stream);

// grad_x (B, P, C) must be zeroed by the caller (points outside the grid keep 0).
void BevPoolBackwardCuda(const float* grad_out, const int64_t* ranks, const int64_t* interval_starts,
                         const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                         int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* grad_x,
                         void* stream);

}  // namespace frontier::bev
