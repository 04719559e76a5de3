// ParamSpec defaults and their consistency checks.
#include "parallel/param_spec.h"

#include "kernels/error.h"

namespace lattice {

void ParamSpec::fill_defaults() {
  if (global_shape.empty()) global_shape = shape;
  if (offset.empty()) offset = Shape(global_shape.size(), 0);
  if (box.empty()) box = shape;
  LATTICE_CHECK(global_shape.size() == shape.size() && offset.size() == shape.size() && box.size() == shape.size(),
                "parameter '{}': local {}, global {}, offset {} and box {} differ in rank", name, shape_string(shape),
                shape_string(global_shape), shape_string(offset), shape_string(box));
  // An empty box (a tp rank whose vocabulary rows are all padding) may start past the end.
  const bool empty = shape_numel(box) == 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    LATTICE_CHECK(box[d] <= shape[d] && offset[d] >= 0 && (empty || offset[d] + box[d] <= global_shape[d]) &&
                      (d == 0 || box[d] == shape[d]),
                  "parameter '{}': box {} at {} does not fit local {} / global {}", name, shape_string(box),
                  shape_string(offset), shape_string(shape), shape_string(global_shape));
  }
}

}  // namespace lattice
