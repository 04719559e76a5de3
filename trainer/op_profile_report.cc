// format_op_profile: per step, in ms, with each row's share of the step and its achieved rates.
#include "trainer/op_profile_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace lattice {

std::string format_op_profile(const std::vector<OpTime>& rows, int64_t steps, double step_s, size_t max_rows) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  const double step_ms = step_s * 1e3;
  const auto share = [&](double ms) { return step_ms > 0 ? fmt::format("{:5.1f}%", 100 * ms / step_ms) : "    -"; };
  // Per second of the row's device time: its operands' bytes, and its products' FLOPs where it has any.
  const auto rate = [](const OpTime& r, double per_call, double unit, int digits) {
    if (per_call <= 0 || r.seconds <= 0) return std::string("-");
    return fmt::format("{:.{}f}", per_call * static_cast<double>(r.calls) / r.seconds / unit, digits);
  };
  std::string out = fmt::format(
      "-- device time by op (--profile-ops), mean per step over {} steps, against the step's median {:.3f} ms --\n"
      "{:>9} {:>6} {:>10} {:>9} {:>8} {:>8}  {:<30} {}\n",
      steps, step_ms, "ms/step", "share", "calls/step", "us/call", "GB/s", "TFLOP/s", "op", "operands");
  // The rows summed: all, the matrix products (FLOPs > 0) and the rest, each as one call of the sums.
  OpTime all{"", "", 1}, products{"", "", 1}, others{"", "", 1};
  double rest_ms = 0;
  int64_t all_calls = 0, product_calls = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpTime& r = rows[i];
    const double ms = r.seconds * 1e3 / n;
    const auto calls = static_cast<double>(r.calls);
    for (OpTime* sum : {&all, r.flops > 0 ? &products : &others}) {
      sum->seconds += r.seconds;
      sum->bytes += r.bytes * calls;
      sum->flops += r.flops * calls;
    }
    all_calls += r.calls;
    if (r.flops > 0) product_calls += r.calls;
    if (i >= max_rows) {
      rest_ms += ms;
      continue;
    }
    out += fmt::format("{:9.3f} {:>6} {:10.1f} {:9.1f} {:>8} {:>8}  {:<30} {}\n", ms, share(ms), calls / n,
                       r.calls > 0 ? r.seconds * 1e6 / calls : 0.0, rate(r, r.bytes, 1e9, 1), rate(r, r.flops, 1e12, 2),
                       r.op, r.operands);
  }
  const std::string blank(17, ' ');  // under GB/s and TFLOP/s
  if (rows.size() > max_rows)
    out += fmt::format("{:9.3f} {:>6} {:>10} {:>9} {}  ({} more rows)\n", rest_ms, share(rest_ms), "", "", blank,
                       rows.size() - max_rows);
  const auto sum_line = [&](const OpTime& sum, int64_t calls, const char* label) {
    const double ms = sum.seconds * 1e3 / n;
    return fmt::format("{:9.3f} {:>6} {:10.1f} {:>9} {:>8} {:>8}  {}\n", ms, share(ms), static_cast<double>(calls) / n,
                       "", rate(sum, sum.bytes, 1e9, 1), rate(sum, sum.flops, 1e12, 2), label);
  };
  out += sum_line(products, product_calls, "matrix products (GEMMs, attention)");
  out += sum_line(others, all_calls - product_calls, "the other ops");
  out += sum_line(all, all_calls, "all ops");
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
