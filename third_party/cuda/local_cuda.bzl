"""@local_cuda: the CUDA toolkit, cuDNN and NCCL that `--config=cuda` builds against.

LATTICE_CUDA_PATH (default /usr/local/cuda) is the toolkit's root: bin/nvcc, include/, lib64/ (or lib/).
LATTICE_CUDNN_PATH and LATTICE_NCCL_PATH (default: the toolkit's root) are prefixes holding cuDNN's and
NCCL's include/ and lib64/ (or lib/), where a cluster's modules or pip wheels keep them apart from the
toolkit. Give them with --repo_env=NAME=PATH; Bazel refetches this repository when one changes. The
CPU-only build needs none of them: a missing path gives a repository whose targets fail if built.
"""

def _lib_dir(ctx, prefix):
    for name in ["lib64", "lib"]:
        if ctx.path(prefix + "/" + name).exists:
            return prefix + "/" + name
    return prefix + "/lib64"

# `name` in the repository: a link to `target`, or an empty folder where it does not exist (or is in
# the toolkit's include/ already), so that globs under it find nothing rather than fail.
def _include_dir(ctx, name, target):
    if target and ctx.path(target).exists:
        ctx.symlink(target, name)
    else:
        ctx.file(name + "/NONE", "")

def _lattice_cuda_repository_impl(ctx):
    env = ctx.os.environ
    cuda = env.get("LATTICE_CUDA_PATH", "/usr/local/cuda").rstrip("/")
    cudnn = env.get("LATTICE_CUDNN_PATH", cuda).rstrip("/")
    nccl = env.get("LATTICE_NCCL_PATH", cuda).rstrip("/")
    _include_dir(ctx, "include", cuda + "/include")
    _include_dir(ctx, "cudnn_include", cudnn + "/include" if cudnn != cuda else None)
    _include_dir(ctx, "nccl_include", nccl + "/include" if nccl != cuda else None)
    ctx.template("BUILD.bazel", ctx.attr.build_template, {
        "%{cuda_lib}": _lib_dir(ctx, cuda),
        "%{cudnn_lib}": _lib_dir(ctx, cudnn),
        "%{nccl_lib}": _lib_dir(ctx, nccl),
    })
    ctx.file("defs.bzl", "# Written by //third_party/cuda:local_cuda.bzl.\nNVCC = \"%s/bin/nvcc\"\n" % cuda)

lattice_cuda_repository = repository_rule(
    implementation = _lattice_cuda_repository_impl,
    attrs = {"build_template": attr.label(default = "//third_party/cuda:cuda.BUILD.tpl")},
    environ = ["LATTICE_CUDA_PATH", "LATTICE_CUDNN_PATH", "LATTICE_NCCL_PATH"],
    local = True,
)
