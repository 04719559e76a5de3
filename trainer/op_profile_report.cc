// format_op_profile: per step, in ms, with each row's share of the step and its achieved rates.
#include "trainer/op_profile_report.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace lattice {

namespace {
// Rows summed: their calls, device time, and the bytes and FLOPs of all their calls.
struct Totals {
  int64_t calls = 0;
  double seconds = 0, bytes = 0, flops = 0;
  void add(const OpTime& r) {
    calls += r.calls;
    seconds += r.seconds;
    bytes += r.bytes * static_cast<double>(r.calls);
    flops += r.flops * static_cast<double>(r.calls);
  }
};
}  // namespace

std::string format_op_profile(const std::vector<OpTime>& rows, int64_t steps, double step_s, size_t max_rows) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  const double step_ms = step_s * 1e3;
  const auto share = [&](double ms) { return step_ms > 0 ? fmt::format("{:5.1f}%", 100 * ms / step_ms) : "    -"; };
  // Per second of device time: bytes moved, or the products' FLOPs where there are any.
  const auto rate = [](double amount, double seconds, double unit, int digits) {
    if (amount <= 0 || seconds <= 0) return std::string("-");
    return fmt::format("{:.{}f}", amount / seconds / unit, digits);
  };
  std::string out = fmt::format(
      "-- device time by op (--profile-ops), mean per step over {} steps, against the step's median {:.3f} ms --\n"
      "{:>9} {:>6} {:>10} {:>9} {:>8} {:>8}  {:<30} {}\n",
      steps, step_ms, "ms/step", "share", "calls/step", "us/call", "GB/s", "TFLOP/s", "op", "operands");
  Totals products, others;  // the matrix products (FLOPs > 0) and the rest
  double rest_ms = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpTime& r = rows[i];
    const double ms = r.seconds * 1e3 / n;
    const auto calls = static_cast<double>(r.calls);
    (r.flops > 0 ? products : others).add(r);
    if (i >= max_rows) {
      rest_ms += ms;
      continue;
    }
    out += fmt::format("{:9.3f} {:>6} {:10.1f} {:9.1f} {:>8} {:>8}  {:<30} {}\n", ms, share(ms), calls / n,
                       r.calls > 0 ? r.seconds * 1e6 / calls : 0.0, rate(r.bytes * calls, r.seconds, 1e9, 1),
                       rate(r.flops * calls, r.seconds, 1e12, 2), r.op, r.operands);
  }
  const std::string blank(17, ' ');  // under GB/s and TFLOP/s
  if (rows.size() > max_rows)
    out += fmt::format("{:9.3f} {:>6} {:>10} {:>9} {}  ({} more rows)\n", rest_ms, share(rest_ms), "", "", blank,
                       rows.size() - max_rows);
  const Totals all{products.calls + others.calls, products.seconds + others.seconds, products.bytes + others.bytes,
                   products.flops + others.flops};
  using Line = std::pair<const Totals*, const char*>;
  for (const auto& [sum, label] :
       {Line{&products, "matrix products (GEMMs, attention)"}, Line{&others, "the other ops"}, Line{&all, "all ops"}}) {
    const double ms = sum->seconds * 1e3 / n;
    out += fmt::format("{:9.3f} {:>6} {:10.1f} {:>9} {:>8} {:>8}  {}\n", ms, share(ms),
                       static_cast<double>(sum->calls) / n, "", rate(sum->bytes, sum->seconds, 1e9, 1),
                       rate(sum->flops, sum->seconds, 1e12, 2), label);
  }
  const double total_ms = all.seconds * 1e3 / n;
  out += fmt::format("{:9.3f} {:>6} {:>10} {:>9} {}  in no op: communication, waits, the device idle while the "
                     "host launches\n",
                     step_ms - total_ms, share(step_ms - total_ms), "", "", blank);
  out += "GB/s: the bytes of an op's operands (each once per product, a floor on what it moves; gathers: the rows "
         "they select; AdamW: read and written back) per second of its device time; TFLOP/s: its matrix products' "
         "FLOPs (attention: causal, as FlashAttention counts them)\n";
  return out;
}

}  // namespace lattice
