// LocalHostChannel: copies; a root other than 0 is an internal error.
#include "parallel/local_host_channel.h"

#include <cstring>

#include "kernels/error.h"

namespace lattice {

void LocalHostChannel::all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view) {
  if (bytes > 0) std::memcpy(out, in, bytes);
}

void LocalHostChannel::broadcast_bytes(void*, size_t, int root, std::string_view what) {
  LATTICE_CHECK(root == 0, "host broadcast of {} from rank {} in a one-process group", what, root);
}

void LocalHostChannel::gather_bytes(const void* in, size_t bytes, const std::vector<size_t>&, void* out, int root,
                                    std::string_view what) {
  LATTICE_CHECK(root == 0, "host gather of {} to rank {} in a one-process group", what, root);
  if (bytes > 0) std::memcpy(out, in, bytes);
}

}  // namespace lattice
