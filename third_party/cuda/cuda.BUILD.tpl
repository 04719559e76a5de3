# The CUDA toolkit, cuDNN and NCCL as one repository (third_party/cuda/local_cuda.bzl fills in the
# library folders: LATTICE_CUDA_PATH, LATTICE_CUDNN_PATH, LATTICE_NCCL_PATH). cuDNN and NCCL are linked
# by soname: their pip wheels (a PyTorch venv's nvidia/cudnn, nvidia/nccl) ship no unversioned .so.
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"]),
    includes = ["include"],
)

cc_library(
    name = "cuda_runtime",
    linkopts = ["-L%{cuda_lib}", "-Wl,-rpath,%{cuda_lib}", "-lcudart"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cublaslt",
    linkopts = ["-L%{cuda_lib}", "-lcublasLt", "-lcublas"],
    deps = [":cuda_runtime"],
)

cc_library(
    name = "cudnn",
    hdrs = glob(["cudnn_include/**/*.h"]),
    includes = ["cudnn_include"],
    linkopts = ["-L%{cudnn_lib}", "-Wl,-rpath,%{cudnn_lib}", "-l:libcudnn.so.9"],
    deps = [":cuda_runtime"],
)

# The runtime compiler: the cuDNN frontend's NVRTC-built engines (experimental/nvrtc_shim.h) call it.
cc_library(
    name = "nvrtc",
    linkopts = ["-L%{cuda_lib}", "-lnvrtc"],
    deps = [":cuda_runtime"],
)

# NVTX 3: header-only; it loads a profiler's injection library (nsys) with dlopen.
cc_library(
    name = "nvtx",
    linkopts = ["-ldl"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "nccl",
    hdrs = glob(["nccl_include/**/*.h"]),
    includes = ["nccl_include"],
    linkopts = ["-L%{nccl_lib}", "-Wl,-rpath,%{nccl_lib}", "-l:libnccl.so.2"],
    deps = [":cuda_runtime"],
)
