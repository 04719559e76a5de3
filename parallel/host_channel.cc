// HostChannel: the variable-length gather, built on the byte primitives each backend provides.
#include "parallel/host_channel.h"

#include <cstdint>
#include <numeric>

namespace lattice {

std::vector<std::string> HostChannel::gather_strings(const std::string& text, int root, std::string_view what) {
  const std::vector<uint64_t> lengths = all_gather<uint64_t>(text.size(), what);
  const std::vector<size_t> counts(lengths.begin(), lengths.end());
  std::string all(rank() == root ? std::accumulate(counts.begin(), counts.end(), size_t{0}) : 0, '\0');
  gather_bytes(text.data(), text.size(), counts, all.data(), root, what);
  if (rank() != root) return {};
  std::vector<std::string> texts;
  size_t begin = 0;
  for (size_t count : counts) {
    texts.push_back(all.substr(begin, count));
    begin += count;
  }
  return texts;
}

}  // namespace lattice
