# Sourced by the mpirun tests. Bazel's sandboxes run in PID namespaces, so concurrent tests see
# the same mpirun pid and OpenMPI derives the same job id from it: their session directories (and
# PMIx shared-memory stores) in a shared /tmp collide ("getting local rank failed"). Give every
# test its own session directory and shared-memory (vader) segments, and keep PMIx's data store in
# process memory.
tmp=${TEST_TMPDIR:-$(mktemp -d)}
export TMPDIR=$tmp
export OMPI_MCA_orte_tmpdir_base=$tmp
export OMPI_MCA_btl_vader_backing_directory=$tmp
export PMIX_MCA_gds=hash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
