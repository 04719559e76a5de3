"""The CUDA kernel files (kernels/cuda/<name>.cu): nvcc compiles them (kernels/cuda/BUILD.bazel) and
tests/cuda_emu rewrites them for the CPU emulator."""

CU_KERNELS = [
    "activation",
    "attention",
    "attention_gemm",
    "cross_entropy",
    "elementwise",
    "embedding",
    "norm",
    "rope",
]
