#!/usr/bin/env bash
# Bazel's workspace status command (.bazelrc: --workspace_status_command): the git commit of the
# source tree, stamped into `lattice --version` by //trainer:build_info. Outside a git checkout (a
# source tarball) the commit is "unknown"; uncommitted changes to tracked files add "-dirty".
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
if [[ $commit != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit=$commit-dirty
fi
echo "STABLE_GIT_COMMIT $commit"
