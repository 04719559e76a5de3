"""Build settings shared by targets that exist only under --config=cuda."""

# target_compatible_with for a target that needs the CUDA toolkit: compatible under --config=cuda,
# skipped (reported SKIPPED; left out of //...) otherwise. This Bazel's @platforms predates
# @platforms//:incompatible, hence the constraint no platform has (third_party/cuda:cuda_build_only).
CUDA_BUILD_ONLY = select({
    "//third_party/cuda:enabled": [],
    "//conditions:default": ["//third_party/cuda:cuda_build_only"],
})
