// Ordered double sums and broadcasts: communicators carry f32/i32, so a double travels as two i32.
#include "parallel/exact_sum.h"

#include <cstring>

namespace lattice {

double exact_sum(Communicator& group, double local) {
  if (group.size() == 1) return local;
  Tensor in = Tensor::empty({2}, DType::kI32);
  Tensor out = Tensor::empty({2 * static_cast<int64_t>(group.size())}, DType::kI32);
  std::memcpy(in.i32(), &local, sizeof(double));
  group.all_gather(in, out);
  double total = 0.0;
  for (int r = 0; r < group.size(); ++r) {
    double part = 0.0;
    std::memcpy(&part, out.i32() + 2 * r, sizeof(double));
    total += part;
  }
  return total;
}

double broadcast_double(Communicator& group, double value, int root) {
  if (group.size() == 1) return value;
  Tensor t = Tensor::empty({2}, DType::kI32);
  std::memcpy(t.i32(), &value, sizeof(double));
  group.broadcast(t, root);
  double out = 0.0;
  std::memcpy(&out, t.i32(), sizeof(double));
  return out;
}

}  // namespace lattice
