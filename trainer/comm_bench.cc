// Communication micro-benchmark (see comm_bench.h).
#include "trainer/comm_bench.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "kernels/tensor.h"
#include "trainer/statistics.h"

namespace lattice {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Messages up to this size fix α, from this size on β (see fit_latency, fit_bandwidth).
constexpr double kLatencyFitMaxBytes = 256 * 1024;
constexpr double kBandwidthFitMinBytes = 4 * 1024 * 1024;

// Latency: y = a + b·x by least squares of the relative error (weights 1/y²) over the small
// messages, whose times it fixes; returns a.
double fit_latency(const std::vector<double>& x, const std::vector<double>& y) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > kLatencyFitMaxBytes) continue;
    const double w = 1 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  const double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  return (sy - b * sx) / sw;
}

// Bandwidth: the bytes of the large messages over their summed times. The plan's bandwidth terms
// are the gradient buckets and parameter gathers (MiB to tens of MiB); on a CPU host those no
// longer fit in cache and move at a fraction of the small messages' rate, which a single line
// through all sizes would hide.
double fit_bandwidth(const std::vector<double>& x, const std::vector<double>& y) {
  double bytes = 0, seconds = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] >= kBandwidthFitMinBytes) {
      bytes += x[i];
      seconds += y[i];
    }
  return seconds > 0 ? bytes / seconds : 0;
}

}  // namespace

CommBenchResult bench_comm(Communicator& world) {
  CommBenchResult r;
  r.ranks = world.size();
  const int n = world.size();
  std::vector<double> ar_x, ar_y, p2p_x, p2p_y;
  for (int64_t bytes = 4096; bytes <= int64_t{64} << 20; bytes *= 4) {
    Tensor t = Tensor::zeros({bytes / 4});
    // Repetitions: enough to move ~256 MiB, at least 5 and at most 50, after 2 warm-ups.
    const int reps = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 5, 50));
    std::vector<double> times;
    for (int i = 0; i < reps + 2; ++i) {
      world.barrier();
      const double start = now_s();
      world.all_reduce_async(t).wait();
      if (i >= 2) times.push_back(now_s() - start);
    }
    const double ar = median(times);
    r.points.push_back({"all_reduce", bytes, ar});
    ar_x.push_back(2.0 * (n - 1) / n * double(bytes));
    ar_y.push_back(ar);
    // Ping-pong between ranks 0 and 1: half a round trip is one message.
    times.clear();
    for (int i = 0; i < reps + 2; ++i) {
      world.barrier();
      const double start = now_s();
      if (world.rank() == 0) {
        world.send_async(t, 1).wait();
        world.recv_async(t, 1).wait();
      } else if (world.rank() == 1) {
        world.recv_async(t, 0).wait();
        world.send_async(t, 0).wait();
      }
      if (i >= 2) times.push_back((now_s() - start) / 2);
    }
    const double p2p = median(times);
    r.points.push_back({"p2p", bytes, p2p});
    p2p_x.push_back(double(bytes));
    p2p_y.push_back(p2p);
  }
  r.all_reduce_alpha = std::max(0.0, fit_latency(ar_x, ar_y) / (2.0 * (n - 1)));
  r.all_reduce_beta = fit_bandwidth(ar_x, ar_y);
  r.p2p_alpha = std::max(0.0, fit_latency(p2p_x, p2p_y));
  r.p2p_beta = fit_bandwidth(p2p_x, p2p_y);
  return r;
}

std::string format_comm_bench(const CommBenchResult& r) {
  std::string out = fmt::format("communication between {} ranks (median of the timed repetitions):\n", r.ranks);
  out += fmt::format("  {:>10} {:>14} {:>14} {:>12} {:>12}\n", "bytes", "all_reduce us", "p2p us", "AR GB/s", "p2p GB/s");
  for (size_t i = 0; i + 1 < r.points.size(); i += 2) {
    const CommBenchPoint& ar = r.points[i];
    const CommBenchPoint& p2p = r.points[i + 1];
    out += fmt::format("  {:>10} {:>14.1f} {:>14.1f} {:>12.2f} {:>12.2f}\n", ar.bytes, 1e6 * ar.seconds,
                       1e6 * p2p.seconds, 2.0 * (r.ranks - 1) / r.ranks * ar.bytes / ar.seconds / 1e9,
                       p2p.bytes / p2p.seconds / 1e9);
  }
  out += fmt::format("  all_reduce: α {:.2f} us per ring step, β {:.2f} GB/s (t = 2(n-1)·α + 2(n-1)/n·bytes/β)\n",
                     1e6 * r.all_reduce_alpha, r.all_reduce_beta / 1e9);
  out += fmt::format("  p2p:        α {:.2f} us per message,   β {:.2f} GB/s (t = α + bytes/β)\n", 1e6 * r.p2p_alpha,
                     r.p2p_beta / 1e9);
  out += fmt::format("  (α fitted to the messages up to {} KiB, β the rate of those from {} MiB on)\n",
                     kLatencyFitMaxBytes / 1024, kBandwidthFitMinBytes / (1024 * 1024));
  // MPI over host memory reduces on the cores that compute: nothing it does is hidden.
  out += fmt::format("  for lattice plan --gpu FILE (ranks on one node): \"intra_node_latency\": {:.3g}, "
                     "\"intra_node_bandwidth\": {:.3g}, \"overlap_communication\": false\n",
                     r.all_reduce_alpha, r.all_reduce_beta);
  return out;
}

}  // namespace lattice
