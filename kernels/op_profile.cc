// OpProfile: one profile per process, owned by the thread that started it.
#include "kernels/op_profile.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "kernels/device_time_sum.h"
#include "kernels/error.h"

namespace lattice {

struct OpProfileRow {
  int64_t calls = 0;
  DeviceTimeSum time;
  double bytes = 0, flops = 0;  // per call: the same for every call of a row's shapes
};

namespace {

struct Profile {
  std::mutex mutex;  // start and stop (rows are only touched by the owner thread in between)
  std::atomic<bool> on{false};
  std::atomic<std::thread::id> owner;  // read by every thread's ops, written by start
  Device device = Device::kCpu;
  std::map<std::pair<std::string, std::string>, OpProfileRow> rows;  // by (op, operands)
};

Profile& profile() {
  static Profile p;
  return p;
}

thread_local int op_depth = 0;  // ops of this thread in progress: only the outermost is timed

std::string describe_operands(std::initializer_list<const Tensor*> tensors, int64_t products) {
  std::string s = products > 1 ? fmt::format("{}x ", products) : std::string();
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (s.size() > 0 && s.back() != ' ') s += ' ';
    s += fmt::format("{}[{}]", dtype_name(t->dtype()), fmt::join(t->shape(), ","));
  }
  return s;
}

}  // namespace

void OpProfile::start(Device device) {
  Profile& p = profile();
  const std::lock_guard lock(p.mutex);
  LATTICE_CHECK(!p.on.load(), "OpProfile::start: a profile is already running");
  p.rows.clear();
  p.owner = std::this_thread::get_id();
  p.device = device;
  p.on.store(true, std::memory_order_release);
}

bool OpProfile::running() { return profile().on.load(std::memory_order_acquire); }

std::vector<OpTime> OpProfile::stop() {
  Profile& p = profile();
  const std::lock_guard lock(p.mutex);
  LATTICE_CHECK(p.on.load() && p.owner == std::this_thread::get_id(),
                "OpProfile::stop: no profile is running on this thread");
  p.on.store(false, std::memory_order_release);
  std::vector<OpTime> out;
  for (const auto& [key, row] : p.rows) {
    if (row.calls > 0) {  // 0: every call threw
      out.push_back({key.first, key.second, row.calls, row.time.seconds(), row.bytes, row.flops});
    }
  }
  p.rows.clear();
  std::stable_sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

OpScope::OpScope(const char* op, std::initializer_list<const Tensor*> tensors, OpWork work)
    : range_(op, NvtxKind::kOp) {
  Profile& p = profile();
  if (!p.on.load(std::memory_order_acquire) || p.owner != std::this_thread::get_id()) return;
  counted_ = true;
  if (op_depth++ > 0) return;
  // Host work (a CPU tensor's op during a GPU run) is not the device's time.
  const bool on_device = std::any_of(tensors.begin(), tensors.end(), [&](const Tensor* t) {
    return t != nullptr && t->defined() && t->device() == p.device;
  });
  if (!on_device) return;
  row_ = &p.rows[{op, describe_operands(tensors, work.products)}];
  if (row_->calls == 0) {
    double bytes = 0;
    for (const Tensor* t : tensors) bytes += t != nullptr && t->defined() ? static_cast<double>(t->bytes()) : 0.0;
    row_->bytes = work.bytes >= 0 ? work.bytes : bytes * static_cast<double>(work.products);
    row_->flops = work.flops;
  }
  uncaught_ = std::uncaught_exceptions();
  start_ = Stream(p.device).record();
}

OpScope::~OpScope() {
  if (row_ != nullptr && std::uncaught_exceptions() == uncaught_) {
    // A failed record is the device failing: the op's own next call reports it, so it is not
    // thrown from a destructor.
    try {
      row_->time.add(start_, Stream(profile().device).record());
      row_->calls += 1;
    } catch (const std::exception&) {
    }
  }
  if (counted_) --op_depth;
}

}  // namespace lattice
