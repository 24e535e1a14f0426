// VSA_HOST_DEVICE marks a function that both the host code and the CUDA
// kernels call, so that a host test checks the very function a kernel runs.
#pragma once

#if defined(__CUDACC__)
#define VSA_HOST_DEVICE __host__ __device__
#else
#define VSA_HOST_DEVICE
#endif
