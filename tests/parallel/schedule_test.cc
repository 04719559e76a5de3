// Pipeline schedules without compute: the simulator proves that GPipe, 1F1B and interleaved 1F1B
// complete for PP 1..8, virtual stages 1..4 and valid micro-batch counts (matched sends, no
// deadlock, forward before backward), stay within their in-flight bounds and reach the textbook
// bubble; broken schedules are caught; bad layouts are InputErrors naming the field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"
#include "parallel/activation_slots.h"
#include "parallel/schedule.h"
#include "parallel/schedule_simulator.h"

using namespace lattice;
using Catch::Matchers::Contains;

namespace {

struct Layout {
  ScheduleKind kind;
  int p, v, m;
};

std::string text(const Layout& l) {
  return fmt::format("{} p={} v={} m={}", schedule_kind_name(l.kind), l.p, l.v, l.m);
}

std::vector<Layout> all_layouts() {
  std::vector<Layout> out;
  for (int p = 1; p <= 8; ++p) {
    // gpipe and 1f1b: any m, including m < p and m not a multiple of p.
    std::set<int> ms = {1, 2, 3, 5, p, p + 1, 2 * p, 2 * p + 1, 3 * p, 4 * p};
    if (p > 1) ms.insert(p - 1);
    for (int m : ms) {
      out.push_back({ScheduleKind::kGPipe, p, 1, m});
      out.push_back({ScheduleKind::kOneFOneB, p, 1, m});
    }
    for (int v = 1; v <= 4; ++v) {
      for (int k = 1; k <= 4; ++k) out.push_back({ScheduleKind::kInterleaved, p, v, k * p});
    }
  }
  return out;
}

// Compute actions only, as "F<chunk>.<mb>" / "B<chunk>.<mb>".
std::vector<std::string> compute_labels(const std::vector<Action>& actions) {
  std::vector<std::string> out;
  for (const Action& a : actions) {
    if (a.type == ActionType::kForward) out.push_back(fmt::format("F{}.{}", a.chunk, a.microbatch));
    if (a.type == ActionType::kBackward) out.push_back(fmt::format("B{}.{}", a.chunk, a.microbatch));
  }
  return out;
}

size_t find_action(const std::vector<Action>& list, ActionType type, int mb, int chunk) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].type == type && list[i].microbatch == mb && list[i].chunk == chunk) return i;
  }
  FAIL("action not found");
  return 0;
}

// Megatron-LM's peak of (micro-batch, chunk) pairs a pp rank holds activations for, written out
// here rather than taken from the library: GPipe all m; 1F1B its p - r - 1 warm-up forwards plus
// the one of the first steady pair (at most m); interleaved its warm-up (p - r - 1)·2 + (v - 1)·p
// forwards (all m·v when m == p) plus one, at most m·v.
int64_t megatron_peak_inflight(ScheduleKind kind, int p, int v, int m, int r) {
  switch (kind) {
    case ScheduleKind::kGPipe: return m;
    case ScheduleKind::kOneFOneB: return std::min(p - r - 1 + 1, m);
    case ScheduleKind::kInterleaved: {
      const int64_t all = int64_t{m} * v;
      if (m == p) return all;
      return std::min(int64_t{p - r - 1} * 2 + int64_t{v - 1} * p + 1, all);
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("every schedule completes with matched messages, bounded memory and the textbook bubble") {
  const std::vector<SimulatorOptions> costs = {{1.0, 1.0}, {1.0, 2.0}, {1.0, 3.0}, {2.0, 3.0}};
  int simulated = 0;
  for (const Layout& l : all_layouts()) {
    const auto schedules = make_all_schedules(l.kind, l.p, l.v, l.m);
    REQUIRE(int(schedules.size()) == l.p);
    for (const SimulatorOptions& o : costs) {
      INFO(text(l) << " forward_cost=" << o.forward_cost << " backward_cost=" << o.backward_cost);
      const SimulationResult res = simulate_schedules(schedules, l.v, l.m, o);
      ++simulated;
      INFO(res.error_text());
      REQUIRE(res.completed);
      REQUIRE_FALSE(res.deadlock);
      REQUIRE(res.errors.empty());
      REQUIRE(res.ok());

      // Busy time per rank: m·v forwards and backwards of cost t/v each = m·(t_f + t_b).
      for (int r = 0; r < l.p; ++r) {
        CHECK(res.busy[r] == Approx(l.m * (o.forward_cost + o.backward_cost)).epsilon(1e-12));
      }
      // Bubble: (p-1)/(v·m+p-1) for interleaved, (p-1)/(m+p-1) for gpipe and 1f1b, exactly.
      const double theory = theoretical_bubble(l.kind, l.p, l.v, l.m);
      const double vm = double(l.v) * l.m;
      CHECK(theory == Approx(double(l.p - 1) / (vm + l.p - 1)).margin(1e-15));
      CHECK(std::abs(res.bubble_fraction - theory) < 1e-12);
      CHECK(std::abs(res.makespan - (vm + l.p - 1) * (o.forward_cost + o.backward_cost) / l.v) < 1e-9);

      // In-flight (micro-batch, chunk) pairs per rank: exactly Megatron's bound, which the
      // library's max_inflight_bound (used to plan activation slots) also gives.
      for (int r = 0; r < l.p; ++r) {
        INFO("rank " << r);
        CHECK(res.peak_inflight[r] == megatron_peak_inflight(l.kind, l.p, l.v, l.m, r));
        CHECK(max_inflight_bound(l.kind, l.p, l.v, l.m, r) == megatron_peak_inflight(l.kind, l.p, l.v, l.m, r));
        if (l.kind == ScheduleKind::kOneFOneB) CHECK(res.peak_inflight[r] <= l.p);
        if (l.kind == ScheduleKind::kGPipe) CHECK(res.peak_inflight[r] == l.m);
      }
    }
    // Each rank: m·v forwards and backwards, a receive before every forward/backward that needs
    // one, a send after every one that feeds another stage.
    for (int r = 0; r < l.p; ++r) {
      const auto& list = schedules[r];
      int64_t n_fwd = 0, n_bwd = 0, n_comm = 0;
      for (const Action& a : list) {
        n_fwd += a.type == ActionType::kForward;
        n_bwd += a.type == ActionType::kBackward;
        n_comm += !is_compute(a.type);
      }
      CHECK(n_fwd == int64_t{l.m} * l.v);
      CHECK(n_bwd == int64_t{l.m} * l.v);
      // Every virtual stage but the first receives activations and sends gradients, every one but
      // the last sends activations and receives gradients: 2 messages per edge and micro-batch.
      int64_t edges = 0;
      for (int c = 0; c < l.v; ++c) {
        const int s = virtual_stage(l.p, r, c);
        edges += (s > 0) + (s < l.p * l.v - 1);
      }
      CHECK(n_comm == 2 * edges * l.m);
    }
  }
  CHECK(simulated > 1000);
}

TEST_CASE("schedules still complete when point-to-point transfers take time") {
  SimulatorOptions o;
  o.p2p_latency = 0.25;
  for (const Layout& l : {Layout{ScheduleKind::kOneFOneB, 4, 1, 8}, Layout{ScheduleKind::kInterleaved, 4, 2, 8},
                          Layout{ScheduleKind::kGPipe, 4, 1, 8}, Layout{ScheduleKind::kInterleaved, 1, 3, 2}}) {
    INFO(text(l));
    const SimulationResult res = simulate_schedules(make_all_schedules(l.kind, l.p, l.v, l.m), l.v, l.m, o);
    INFO(res.error_text());
    REQUIRE(res.ok());
    if (l.p > 1) CHECK(res.bubble_fraction > theoretical_bubble(l.kind, l.p, l.v, l.m));
  }
}

TEST_CASE("per-chunk costs: uniform ones time like the textbook costs, a heavier last stage lengthens the step") {
  for (const auto& [kind, v] : {std::pair{ScheduleKind::kOneFOneB, 1}, std::pair{ScheduleKind::kInterleaved, 2}}) {
    const int p = 4, m = 8;
    INFO(schedule_kind_name(kind));
    const auto lists = make_all_schedules(kind, p, v, m);
    SimulatorOptions uniform;  // forward 1, backward 2 per stage
    SimulatorOptions chunked;
    chunked.chunk_forward_cost.assign(p, std::vector<double>(v, 1.0 / v));
    chunked.chunk_backward_cost.assign(p, std::vector<double>(v, 2.0 / v));
    const SimulationResult a = simulate_schedules(lists, v, m, uniform);
    const SimulationResult b = simulate_schedules(lists, v, m, chunked);
    REQUIRE(b.ok());
    CHECK(b.makespan == Approx(a.makespan));
    CHECK(b.bubble_fraction == Approx(a.bubble_fraction));
    // The loss head on the last virtual stage: its chunk costs 50% more; the step takes at least m
    // times the extra (that rank is the bottleneck in the steady state) and the bubble grows.
    chunked.chunk_forward_cost[p - 1][v - 1] *= 1.5;
    chunked.chunk_backward_cost[p - 1][v - 1] *= 1.5;
    const SimulationResult c = simulate_schedules(lists, v, m, chunked);
    REQUIRE(c.ok());
    CHECK(c.makespan >= a.makespan + m * 0.5 * 3.0 / v - 1e-9);
    CHECK(c.bubble_fraction > a.bubble_fraction);
  }
}

TEST_CASE("1F1B and interleaved orders are Megatron-LM's") {
  // 1F1B, p = 4, m = 6, rank 1: 2 warm-up forwards, 4 pairs, 2 cool-down backwards.
  CHECK(compute_labels(make_schedule(ScheduleKind::kOneFOneB, 4, 1, 6, 1)) ==
        std::vector<std::string>{"F0.0", "F0.1", "F0.2", "B0.0", "F0.3", "B0.1", "F0.4", "B0.2",
                                 "F0.5", "B0.3", "B0.4", "B0.5"});
  // 1F1B with fewer micro-batches than stages: rank 0 of p = 4, m = 2 runs all forwards first.
  CHECK(compute_labels(make_schedule(ScheduleKind::kOneFOneB, 4, 1, 2, 0)) ==
        std::vector<std::string>{"F0.0", "F0.1", "B0.0", "B0.1"});
  // Interleaved, p = 2, v = 2, m = 4, rank 0: warm-up (2-0-1)·2 + (2-1)·2 = 4; micro-batches in
  // groups of p per chunk; backwards from the last chunk.
  CHECK(compute_labels(make_schedule(ScheduleKind::kInterleaved, 2, 2, 4, 0)) ==
        std::vector<std::string>{"F0.0", "F0.1", "F1.0", "F1.1", "F0.2", "B1.0", "F0.3", "B1.1",
                                 "F1.2", "B0.0", "F1.3", "B0.1", "B1.2", "B1.3", "B0.2", "B0.3"});
  // Rank 1 (last) of the same: warm-up (2-1)·2 = 2.
  CHECK(compute_labels(make_schedule(ScheduleKind::kInterleaved, 2, 2, 4, 1)) ==
        std::vector<std::string>{"F0.0", "F0.1", "F1.0", "B1.0", "F1.1", "B1.1", "F0.2", "B0.0",
                                 "F0.3", "B0.1", "F1.2", "B1.2", "F1.3", "B1.3", "B0.2", "B0.3"});
  // Communication around compute, with Megatron's virtual stage layout c·p + r.
  const auto r0 = make_schedule(ScheduleKind::kInterleaved, 2, 2, 4, 0);
  const std::vector<Action> head(r0.begin(), r0.begin() + 6);
  CHECK(head == std::vector<Action>{{ActionType::kForward, 0, 0, -1},  // stage 0: no receive
                                    {ActionType::kSendActivation, 0, 0, 1},
                                    {ActionType::kForward, 1, 0, -1},
                                    {ActionType::kSendActivation, 1, 0, 1},
                                    {ActionType::kRecvActivation, 0, 1, 1},  // stage 2 from stage 1
                                    {ActionType::kForward, 0, 1, -1}});
  const auto r1 = make_schedule(ScheduleKind::kInterleaved, 2, 2, 4, 1);
  const size_t b = find_action(r1, ActionType::kBackward, 0, 1);  // stage 3 = last: no RecvGrad
  CHECK(r1[b - 1].type == ActionType::kForward);
  CHECK(r1[b + 1] == Action{ActionType::kSendGrad, 0, 1, 0});
  const size_t b0 = find_action(r1, ActionType::kBackward, 0, 0);  // stage 1 gets stage 2's gradient
  CHECK(r1[b0 - 1] == Action{ActionType::kRecvGrad, 0, 0, 0});
  CHECK(r1[b0 + 1] == Action{ActionType::kSendGrad, 0, 0, 0});
  // p = 1, v = 2: chunk 0 hands its activation to chunk 1 on the same rank.
  const auto solo = make_schedule(ScheduleKind::kInterleaved, 1, 2, 1, 0);
  CHECK(solo[1] == Action{ActionType::kSendActivation, 0, 0, 0});
  CHECK(solo[2] == Action{ActionType::kRecvActivation, 0, 1, 0});
}

TEST_CASE("the simulator reports deadlocks, unmatched messages and out-of-order compute") {
  const int p = 2, v = 1, m = 2;
  const auto good = make_all_schedules(ScheduleKind::kOneFOneB, p, v, m);
  REQUIRE(simulate_schedules(good, v, m).ok());

  SECTION("a receive moved before the send it transitively depends on is a deadlock") {
    // Rank 0 waits for micro-batch 0's gradient before sending its activation; rank 1 waits for
    // that activation before it can produce the gradient.
    auto bad = good;
    const size_t send = find_action(bad[0], ActionType::kSendActivation, 0, 0);
    const size_t recv = find_action(bad[0], ActionType::kRecvGrad, 0, 0);
    std::swap(bad[0][send], bad[0][recv]);
    const SimulationResult res = simulate_schedules(bad, v, m);
    INFO(res.error_text());
    CHECK_FALSE(res.completed);
    CHECK(res.deadlock);
    CHECK_FALSE(res.ok());
    REQUIRE(res.errors.size() == 1);
    CHECK_THAT(res.errors[0], Contains("deadlock") && Contains("rank 0 waits") && Contains("rank 1 waits"));
  }
  SECTION("a missing receive leaves a send unmatched and a forward without its input") {
    auto bad = good;
    const size_t recv = find_action(bad[1], ActionType::kRecvActivation, 1, 0);
    bad[1].erase(bad[1].begin() + recv);
    const SimulationResult res = simulate_schedules(bad, v, m);
    INFO(res.error_text());
    CHECK(res.completed);
    CHECK_FALSE(res.deadlock);
    CHECK_FALSE(res.ok());
    CHECK_THAT(res.error_text(), Contains("unmatched send") && Contains("activation of micro-batch 1"));
    CHECK_THAT(res.error_text(), Contains("before receiving its input"));
  }
  SECTION("a missing send leaves a receive waiting forever: unmatched, not a deadlock") {
    auto bad = good;
    const size_t send = find_action(bad[1], ActionType::kSendGrad, 1, 0);
    bad[1].erase(bad[1].begin() + send);
    const SimulationResult res = simulate_schedules(bad, v, m);
    INFO(res.error_text());
    CHECK_FALSE(res.completed);
    CHECK_FALSE(res.deadlock);
    CHECK_THAT(res.error_text(), Contains("unmatched receive") && Contains("gradient of micro-batch 1"));
  }
  SECTION("a backward before its forward") {
    auto bad = make_all_schedules(ScheduleKind::kGPipe, 1, 1, 2);
    std::swap(bad[0][0], bad[0][3]);  // B1 F1 B0 F0 ... F0 F1 B0 B1 -> B1 F1 B0 F0
    const SimulationResult res = simulate_schedules(bad, 1, 2);
    CHECK(res.completed);
    CHECK_THAT(res.error_text(), Contains("Backward(mb=1, chunk=0): backward before its forward"));
  }
  SECTION("a send to the wrong peer and a duplicated forward") {
    auto bad = make_all_schedules(ScheduleKind::kInterleaved, 4, 2, 4);
    const size_t send = find_action(bad[3], ActionType::kSendActivation, 0, 0);
    bad[3][send].peer = 2;  // stage 3 -> stage 4 lives on rank 0
    bad[2].push_back({ActionType::kForward, 0, 0, -1});
    const SimulationResult res = simulate_schedules(bad, 2, 4);
    CHECK(res.completed);
    CHECK_THAT(res.error_text(), Contains("virtual stage 4 lives on rank 0, not on peer 2"));
    CHECK_THAT(res.error_text(), Contains("rank 2") && Contains("forward runs a second time"));
  }
  SECTION("a schedule that skips a micro-batch") {
    auto bad = make_all_schedules(ScheduleKind::kGPipe, 1, 1, 3);
    bad[0].erase(std::remove_if(bad[0].begin(), bad[0].end(), [](const Action& a) { return a.microbatch == 2; }),
                 bad[0].end());
    const SimulationResult res = simulate_schedules(bad, 1, 3);
    CHECK(res.completed);
    CHECK_THAT(res.error_text(), Contains("forward of micro-batch 2 on chunk 0 never runs"));
  }
}

TEST_CASE("forward-only lists (evaluation) complete for every layout, one slot per chunk") {
  for (const Layout& l : all_layouts()) {
    INFO(text(l));
    std::vector<std::vector<Action>> lists;
    for (int r = 0; r < l.p; ++r) lists.push_back(make_forward_only_schedule(l.p, l.v, l.m, r));
    SimulatorOptions o;
    o.forward_only = true;
    const SimulationResult res = simulate_schedules(lists, l.v, l.m, o);
    INFO(res.error_text());
    REQUIRE(res.ok());
    for (int r = 0; r < l.p; ++r) {
      CHECK(compute_labels(lists[r]).size() == size_t(l.m) * l.v);
      const ActivationSlots slots = plan_activation_slots(lists[r], l.v, l.m);
      for (int c = 0; c < l.v; ++c) {
        CHECK(slots.needed[c] == 1);
        CHECK(slots.last_backward[c] == -1);
      }
    }
  }
  // Without a forward-only simulation the missing backwards are errors.
  const SimulationResult strict = simulate_schedules({make_forward_only_schedule(1, 1, 2, 0)}, 1, 2);
  CHECK_FALSE(strict.ok());
  CHECK_THAT(strict.error_text(), Contains("backward of micro-batch 0 on chunk 0 never runs"));
}

TEST_CASE("activation slots from the action list: peak per chunk, no slot shared while in flight") {
  for (const Layout& l : all_layouts()) {
    for (int r = 0; r < l.p; ++r) {
      INFO(text(l) << " rank " << r);
      const std::vector<Action> list = make_schedule(l.kind, l.p, l.v, l.m, r);
      const ActivationSlots slots = plan_activation_slots(list, l.v, l.m);
      // Replay: a slot is held from a forward to its backward and never by two micro-batches.
      std::vector<std::vector<int>> holder(l.v);
      std::vector<int> live(l.v, 0), peak(l.v, 0);
      int total = 0, peak_total = 0;
      for (const Action& a : list) {
        if (!is_compute(a.type)) continue;
        const int s = slots.slot[a.chunk][a.microbatch];
        REQUIRE(s >= 0);
        REQUIRE(s < slots.needed[a.chunk]);
        auto& h = holder[a.chunk];
        if (int(h.size()) <= s) h.resize(s + 1, -1);
        if (a.type == ActionType::kForward) {
          REQUIRE(h[s] == -1);
          h[s] = a.microbatch;
          peak[a.chunk] = std::max(peak[a.chunk], ++live[a.chunk]);
          peak_total = std::max(peak_total, ++total);
        } else {
          REQUIRE(h[s] == a.microbatch);
          h[s] = -1;
          --live[a.chunk];
          --total;
        }
      }
      for (int c = 0; c < l.v; ++c) {
        CHECK(slots.needed[c] == peak[c]);
        CHECK(slots.last_backward[c] == l.m - 1);  // backwards of a chunk run in micro-batch order
      }
      CHECK(peak_total == max_inflight_bound(l.kind, l.p, l.v, l.m, r));
      if (l.v == 1) CHECK(slots.needed[0] == max_inflight_bound(l.kind, l.p, l.v, l.m, r));
    }
  }
}

TEST_CASE("activation slots shared by a rank's chunks: one pool holds what is in flight on them together") {
  for (const Layout& l : all_layouts()) {
    if (l.v == 1) continue;
    for (int r = 0; r < l.p; ++r) {
      INFO(text(l) << " rank " << r);
      const std::vector<Action> list = make_schedule(l.kind, l.p, l.v, l.m, r);
      // Every chunk but the last shares chunk 0's pool (activation_slot_pools with the head on the last).
      std::vector<int> pools(l.v, 0);
      pools[l.v - 1] = l.v - 1;
      const ActivationSlots own = plan_activation_slots(list, l.v, l.m);
      const ActivationSlots shared = plan_activation_slots(list, l.v, l.m, pools);
      CHECK(shared.needed == own.needed);
      CHECK(shared.pool == pools);
      // Replay: no pool slot is held by two (micro-batch, chunk) pairs; the pool's size is their peak.
      std::vector<std::pair<int, int>> holder;
      int live = 0, peak = 0, own_sum = 0;
      for (const Action& a : list) {
        if (!is_compute(a.type) || pools[a.chunk] != 0) continue;
        const int s = shared.slot[a.chunk][a.microbatch];
        REQUIRE(s >= 0);
        REQUIRE(s < shared.pool_slots[0]);
        if (int(holder.size()) <= s) holder.resize(s + 1, {-1, -1});
        if (a.type == ActionType::kForward) {
          REQUIRE(holder[s].first == -1);
          holder[s] = {a.chunk, a.microbatch};
          peak = std::max(peak, ++live);
        } else {
          REQUIRE(holder[s] == std::make_pair(a.chunk, a.microbatch));
          holder[s] = {-1, -1};
          --live;
        }
      }
      for (int c = 0; c + 1 < l.v; ++c) own_sum += own.needed[c];
      CHECK(shared.pool_slots[0] == peak);
      CHECK(shared.pool_slots[0] <= own_sum);
      CHECK(shared.pool_slots[l.v - 1] == own.needed[l.v - 1]);
      CHECK(shared.slot[l.v - 1] == own.slot[l.v - 1]);
    }
  }
}

TEST_CASE("bad layouts are InputErrors that name the field") {
  auto fails_with = [](auto&& fn, const std::string& needle) {
    INFO(needle);
    CHECK_THROWS_AS(fn(), InputError);
    CHECK_THROWS_WITH(fn(), Contains(needle));
  };
  fails_with([] { make_schedule(ScheduleKind::kOneFOneB, 4, 2, 8, 0); }, "parallel.virtual_stages = 2");
  fails_with([] { make_schedule(ScheduleKind::kGPipe, 4, 3, 8, 0); }, "parallel.schedule = \"interleaved\"");
  fails_with([] { make_schedule(ScheduleKind::kOneFOneB, 4, 1, 0, 0); }, "training.global_batch_size");
  fails_with([] { make_schedule(ScheduleKind::kInterleaved, 4, 2, 6, 0); }, "multiple of parallel.pipeline = 4");
  fails_with([] { make_schedule(ScheduleKind::kInterleaved, 4, 2, 6, 0); }, "training.micro_batch_size × parallel.data) = 6");
  fails_with([] { make_schedule(ScheduleKind::kInterleaved, 4, 2, 6, 0); }, "4 or 8");
  fails_with([] { make_schedule(ScheduleKind::kInterleaved, 4, 2, 3, 0); }, "so that the count is 4 (");
  fails_with([] { make_schedule(ScheduleKind::kInterleaved, 4, 0, 4, 0); }, "parallel.virtual_stages = 0");
  fails_with([] { make_schedule(ScheduleKind::kOneFOneB, 0, 1, 4, 0); }, "parallel.pipeline = 0");
  fails_with([] { theoretical_bubble(ScheduleKind::kInterleaved, 3, 2, 4); }, "parallel.pipeline = 3");
  fails_with([] { max_inflight_bound(ScheduleKind::kOneFOneB, 2, 2, 4, 0); }, "parallel.virtual_stages");
  fails_with([] { parse_schedule_kind("1F1B"); }, "parallel.schedule = \"1F1B\"");
  CHECK(parse_schedule_kind("gpipe") == ScheduleKind::kGPipe);
  CHECK(parse_schedule_kind("1f1b") == ScheduleKind::kOneFOneB);
  CHECK(parse_schedule_kind("interleaved") == ScheduleKind::kInterleaved);
  // A rank outside the pipeline is a programming error, not bad input.
  CHECK_THROWS_AS(make_schedule(ScheduleKind::kOneFOneB, 4, 1, 4, 4), Error);
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::kOneFOneB, 4, 1, 4, 4), Contains("pp rank 4 outside [0, 4)"));
}

TEST_CASE("bubble table and timelines (printed)") {
  const SimulatorOptions o{1.0, 2.0};
  std::cout << "\nsimulated pipeline bubble, forward = 1, backward = 2 per stage and micro-batch\n"
            << fmt::format("{:<12} {:>2} {:>2} {:>3} {:>10} {:>10} {:>14}\n", "schedule", "p", "v", "m",
                           "simulated", "theory", "peak in-flight");
  for (const Layout& l : {Layout{ScheduleKind::kGPipe, 4, 1, 8}, Layout{ScheduleKind::kOneFOneB, 4, 1, 8},
                          Layout{ScheduleKind::kInterleaved, 4, 2, 8}, Layout{ScheduleKind::kInterleaved, 4, 4, 8},
                          Layout{ScheduleKind::kOneFOneB, 8, 1, 32}, Layout{ScheduleKind::kInterleaved, 8, 2, 32},
                          Layout{ScheduleKind::kInterleaved, 8, 4, 32}, Layout{ScheduleKind::kOneFOneB, 2, 1, 4},
                          Layout{ScheduleKind::kInterleaved, 2, 2, 4}}) {
    const SimulationResult res = simulate_schedules(make_all_schedules(l.kind, l.p, l.v, l.m), l.v, l.m, o);
    REQUIRE(res.ok());
    const double theory = theoretical_bubble(l.kind, l.p, l.v, l.m);
    CHECK(std::abs(res.bubble_fraction - theory) < 1e-12);
    std::cout << fmt::format("{:<12} {:>2} {:>2} {:>3} {:>10.6f} {:>10.6f} {:>14}\n", schedule_kind_name(l.kind),
                             l.p, l.v, l.m, res.bubble_fraction, theory, res.peak_inflight[0]);
  }
  for (const Layout& l : {Layout{ScheduleKind::kOneFOneB, 4, 1, 8}, Layout{ScheduleKind::kInterleaved, 4, 2, 8}}) {
    const SimulationResult res = simulate_schedules(make_all_schedules(l.kind, l.p, l.v, l.m), l.v, l.m, o);
    REQUIRE(res.ok());
    const std::string chart = render_timeline(res, l.v, 0, o);
    // One row per rank, one cell per time unit (forward_cost / v).
    CHECK(std::count(chart.begin(), chart.end(), '\n') == l.p);
    std::cout << "\n" << text(l) << " (one cell = " << o.forward_cost / l.v << " time units, F/B<chunk>.<mb>)\n"
              << chart;
  }
}
