// The tensor-parallel group as the model's layers see it: tp size 1 (group nullptr) makes every
// tensor-parallel communication an identity, so one code path serves every layout.
#pragma once

#include "parallel/communicator.h"

namespace lattice {

struct TensorParallel {
  Communicator* group = nullptr;  // nullptr: tp size 1
  bool sequence_parallel = false;

  int size() const { return group != nullptr ? group->size() : 1; }
  int rank() const { return group != nullptr ? group->rank() : 0; }
};

}  // namespace lattice
