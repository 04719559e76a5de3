// Pipeline schedules as data: GPipe, 1F1B and interleaved 1F1B action lists (see schedule.h).
#include "parallel/schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    if (name == schedule_kind_name(k)) return k;
  }
  throw InputError(fmt::format(
      "parallel.schedule = \"{}\" is not a pipeline schedule; use one of \"gpipe\", \"1f1b\", "
      "\"interleaved\"",
      name));
}

const char* action_type_name(ActionType type) {
  switch (type) {
    case ActionType::kForward: return "Forward";
    case ActionType::kBackward: return "Backward";
    case ActionType::kSendActivation: return "SendActivation";
    case ActionType::kRecvActivation: return "RecvActivation";
    case ActionType::kSendGrad: return "SendGrad";
    case ActionType::kRecvGrad: return "RecvGrad";
  }
  return "?";
}

bool is_compute(ActionType t) { return t == ActionType::kForward || t == ActionType::kBackward; }
bool is_send(ActionType t) { return t == ActionType::kSendActivation || t == ActionType::kSendGrad; }
bool is_recv(ActionType t) { return t == ActionType::kRecvActivation || t == ActionType::kRecvGrad; }
bool is_grad_transfer(ActionType t) { return t == ActionType::kSendGrad || t == ActionType::kRecvGrad; }

std::string to_string(const Action& a) {
  if (is_compute(a.type)) {
    return fmt::format("{}(mb={}, chunk={})", action_type_name(a.type), a.microbatch, a.chunk);
  }
  return fmt::format("{}(mb={}, chunk={}, peer={})", action_type_name(a.type), a.microbatch,
                     a.chunk, a.peer);
}

void validate_schedule(ScheduleKind kind, int p, int v, int m) {
  if (p < 1) {
    throw InputError(fmt::format("parallel.pipeline = {} must be at least 1", p));
  }
  if (v < 1) {
    throw InputError(fmt::format("parallel.virtual_stages = {} must be at least 1", v));
  }
  if (v > 1 && kind != ScheduleKind::kInterleaved) {
    throw InputError(fmt::format(
        "parallel.virtual_stages = {} needs parallel.schedule = \"interleaved\" (\"{}\" runs one "
        "model chunk per pipeline stage); set parallel.virtual_stages to 1 or parallel.schedule to "
        "\"interleaved\"",
        v, schedule_kind_name(kind)));
  }
  if (m < 1) {
    throw InputError(fmt::format(
        "the number of micro-batches per step, training.global_batch_size / "
        "(training.micro_batch_size × parallel.data) = {}, must be at least 1; raise "
        "training.global_batch_size",
        m));
  }
  if (kind == ScheduleKind::kInterleaved && m % p != 0) {
    const int lower = m / p * p, upper = lower + p;
    throw InputError(fmt::format(
        "parallel.schedule = \"interleaved\" needs the number of micro-batches per step, "
        "training.global_batch_size / (training.micro_batch_size × parallel.data) = {}, to be a "
        "multiple of parallel.pipeline = {}; change training.global_batch_size so that the count is "
        "{}{} (or use parallel.schedule = \"1f1b\")",
        m, p, lower > 0 ? fmt::format("{} or ", lower) : "", upper));
  }
}

namespace {

struct Compute {
  bool forward;
  int microbatch;
  int chunk;
};

// Warm-up forwards of the interleaved schedule on rank r (Megatron-LM), before capping at m·v.
int64_t interleaved_warmup(int p, int v, int m, int r) {
  if (m == p) return int64_t{m} * v;  // all forwards first, then all backwards
  return int64_t{p - r - 1} * 2 + int64_t{v - 1} * p;
}

std::vector<Compute> compute_order(ScheduleKind kind, int p, int v, int m, int r) {
  std::vector<Compute> out;
  out.reserve(size_t(2) * m * v);
  switch (kind) {
    case ScheduleKind::kGPipe: {
      for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
      for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
      break;
    }
    case ScheduleKind::kOneFOneB: {
      const int warmup = std::min(p - r - 1, m);
      for (int i = 0; i < warmup; ++i) out.push_back({true, i, 0});
      for (int i = 0; i < m - warmup; ++i) {
        out.push_back({true, warmup + i, 0});
        out.push_back({false, i, 0});
      }
      for (int i = m - warmup; i < m; ++i) out.push_back({false, i, 0});
      break;
    }
    case ScheduleKind::kInterleaved: {
      const int64_t total = int64_t{m} * v;
      const int64_t warmup = std::min(interleaved_warmup(p, v, m, r), total);
      const int64_t group = int64_t{p} * v;
      auto microbatch = [&](int64_t k) { return int((k / group) * p + k % p); };
      auto fwd = [&](int64_t k) { return Compute{true, microbatch(k), int((k / p) % v)}; };
      auto bwd = [&](int64_t k) { return Compute{false, microbatch(k), int(v - 1 - (k / p) % v)}; };
      for (int64_t k = 0; k < warmup; ++k) out.push_back(fwd(k));
      for (int64_t k = 0; k < total - warmup; ++k) {
        out.push_back(fwd(warmup + k));
        out.push_back(bwd(k));
      }
      for (int64_t k = total - warmup; k < total; ++k) out.push_back(bwd(k));
      break;
    }
  }
  return out;
}

}  // namespace

std::vector<Action> make_schedule(ScheduleKind kind, int p, int v, int m, int pp_rank) {
  validate_schedule(kind, p, v, m);
  LATTICE_CHECK(pp_rank >= 0 && pp_rank < p, "pp rank {} outside [0, {})", pp_rank, p);
  const int r = pp_rank, prev = (r - 1 + p) % p, next = (r + 1) % p;
  const int last_stage = p * v - 1;
  std::vector<Action> out;
  out.reserve(size_t(4) * m * v);
  for (const Compute& c : compute_order(kind, p, v, m, r)) {
    const int s = virtual_stage(p, r, c.chunk);
    if (c.forward) {
      if (s > 0) out.push_back({ActionType::kRecvActivation, c.microbatch, c.chunk, prev});
      out.push_back({ActionType::kForward, c.microbatch, c.chunk, -1});
      if (s < last_stage) out.push_back({ActionType::kSendActivation, c.microbatch, c.chunk, next});
    } else {
      if (s < last_stage) out.push_back({ActionType::kRecvGrad, c.microbatch, c.chunk, next});
      out.push_back({ActionType::kBackward, c.microbatch, c.chunk, -1});
      if (s > 0) out.push_back({ActionType::kSendGrad, c.microbatch, c.chunk, prev});
    }
  }
  return out;
}

std::vector<std::vector<Action>> make_all_schedules(ScheduleKind kind, int p, int v, int m) {
  validate_schedule(kind, p, v, m);
  std::vector<std::vector<Action>> out;
  out.reserve(p);
  for (int r = 0; r < p; ++r) out.push_back(make_schedule(kind, p, v, m, r));
  return out;
}

std::vector<Action> make_forward_only_schedule(int p, int v, int m, int pp_rank) {
  LATTICE_CHECK(p >= 1 && v >= 1 && m >= 1, "forward-only schedule for p={}, v={}, m={}", p, v, m);
  LATTICE_CHECK(pp_rank >= 0 && pp_rank < p, "pp rank {} outside [0, {})", pp_rank, p);
  const int r = pp_rank, prev = (r - 1 + p) % p, next = (r + 1) % p;
  const int last_stage = p * v - 1;
  std::vector<Action> out;
  out.reserve(size_t(3) * m * v);
  for (int mb = 0; mb < m; ++mb) {
    for (int c = 0; c < v; ++c) {
      const int s = virtual_stage(p, r, c);
      if (s > 0) out.push_back({ActionType::kRecvActivation, mb, c, prev});
      out.push_back({ActionType::kForward, mb, c, -1});
      if (s < last_stage) out.push_back({ActionType::kSendActivation, mb, c, next});
    }
  }
  return out;
}

double theoretical_bubble(ScheduleKind kind, int p, int v, int m) {
  validate_schedule(kind, p, v, m);
  const double vm = kind == ScheduleKind::kInterleaved ? double(v) * m : double(m);
  return double(p - 1) / (vm + p - 1);
}

int64_t max_inflight_bound(ScheduleKind kind, int p, int v, int m, int pp_rank) {
  validate_schedule(kind, p, v, m);
  LATTICE_CHECK(pp_rank >= 0 && pp_rank < p, "pp rank {} outside [0, {})", pp_rank, p);
  switch (kind) {
    case ScheduleKind::kGPipe: return m;
    case ScheduleKind::kOneFOneB: return std::min(p - pp_rank, m);
    case ScheduleKind::kInterleaved:
      return std::min(interleaved_warmup(p, v, m, pp_rank) + 1, int64_t{m} * v);
  }
  return 0;
}

}  // namespace lattice
