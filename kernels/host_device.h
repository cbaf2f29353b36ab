// DTR_HOST_DEVICE marks a function that the CPU kernels (g++, C++20) and the CUDA kernels (nvcc, C++17) both
// compile from one definition, so that the two backends cannot drift apart: __host__ __device__ under nvcc,
// nothing otherwise. Headers that use it must stay C++17 and include no dtr/op.h.
#pragma once

#if defined(__CUDACC__)
#define DTR_HOST_DEVICE __host__ __device__
#else
#define DTR_HOST_DEVICE
#endif
