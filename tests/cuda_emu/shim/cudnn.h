// Stands in for <cudnn.h> in the emulated build: only the handle type kernels/cuda/cudnn_sdpa.h
// names (the emulated SDPA, tests/cuda_emu/sdpa_emu.cc, runs the emulated f32 kernels instead).
#pragma once

using cudnnHandle_t = struct cudnnContext*;
