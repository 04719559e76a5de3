// Greedy, temperature and top-k sampling.
#include "trainer/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/error.h"

namespace lattice {

int32_t sample_token(std::span<const float> logits, double temperature, int64_t top_k, std::mt19937_64& rng) {
  LATTICE_CHECK(!logits.empty() && temperature >= 0 && top_k >= 0, "sample_token: {} logits, temperature {}, top_k {}",
                logits.size(), temperature, top_k);
  if (temperature == 0)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = top_k > 0 ? std::min<size_t>(static_cast<size_t>(top_k), order.size()) : order.size();
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(k);
  // Softmax in double, shifted by the largest logit (order[0]).
  std::vector<double> weights(k);
  double total = 0;
  for (size_t i = 0; i < k; ++i) {
    weights[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) / temperature);
    total += weights[i];
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;  // in [0, total)
  double cumulative = 0;
  for (size_t i = 0; i < k; ++i) {
    cumulative += weights[i];
    if (u < cumulative) return order[i];
  }
  return order[k - 1];  // rounding left u at the very top
}

}  // namespace lattice
