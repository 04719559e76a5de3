// The pipeline's transfers on an ordered transport (NCCL: no tags, sends and receives on one
// communicator match in issue order and run one after another): p2p_issue_order puts each on its
// lane, and check_ordered_p2p proves that every built-in schedule's transfers match their
// counterparts and complete. Lists broken on purpose (two sends swapped, a cycle of waits) are
// caught, so the proof can fail.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "parallel/p2p_order.h"

namespace lattice {
namespace {

Action act(ActionType t, int mb, int chunk, int peer) { return Action{t, mb, chunk, peer}; }
Action compute(ActionType t, int mb, int chunk = 0) { return Action{t, mb, chunk, -1}; }

// Both device models: the lanes' streams side by side, and every stream through one hardware queue.
constexpr P2pDeviceModel kModels[] = {P2pDeviceModel::kConcurrentStreams, P2pDeviceModel::kOneHardwareQueue};
const char* model_name(P2pDeviceModel m) {
  return m == P2pDeviceModel::kConcurrentStreams ? "concurrent streams" : "one hardware queue";
}

std::string joined(const std::vector<std::string>& errors) {
  std::string s;
  for (const std::string& e : errors) s += e + "\n";
  return s;
}

TEST_CASE("a send follows its compute; a receive comes one compute early, on its own lane") {
  // p = 2, m = 3, rank 0: F0 F1 B0 F2 B1 B2 (one warm-up forward, then pairs, then a backward).
  const std::vector<Action> list = make_schedule(ScheduleKind::kOneFOneB, 2, 1, 3, 0);
  INFO("list: " << [&] {
    std::string s;
    for (const Action& a : list) s += to_string(a) + " ";
    return s;
  }());
  struct Issued {
    int after;
    P2pLane lane;
    Action action;
    bool operator==(const Issued&) const = default;
  };
  std::vector<Issued> got;
  for (const P2pIssue& i : p2p_issue_order(list, 0)) got.push_back({i.after_compute, i.lane, list[i.action]});
  using T = ActionType;
  using L = P2pLane;
  const std::vector<Issued> want = {
      {0, L::kSendActivation, act(T::kSendActivation, 0, 0, 1)},  // after F0
      {0, L::kRecvGrad, act(T::kRecvGrad, 0, 0, 1)},              // B0's input, before F1 runs
      {1, L::kSendActivation, act(T::kSendActivation, 1, 0, 1)},
      {2, L::kRecvGrad, act(T::kRecvGrad, 1, 0, 1)},  // B1's, before F2
      {3, L::kSendActivation, act(T::kSendActivation, 2, 0, 1)},
      {3, L::kRecvGrad, act(T::kRecvGrad, 2, 0, 1)},  // B2's, before B1
  };
  CHECK(got == want);
}

TEST_CASE("local hand-overs (p = 1, v > 1) are no transfer") {
  const std::vector<Action> list = make_schedule(ScheduleKind::kInterleaved, 1, 2, 2, 0);
  CHECK(p2p_issue_order(list, 0).empty());
  CHECK(check_ordered_p2p({list}).empty());
}

TEST_CASE("every schedule's transfers match and complete on an ordered transport") {
  int checked = 0;
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p, p + 1, 2 * p + 3}) {
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
        for (int v : {1, 2, 3, 4}) {
          if (kind != ScheduleKind::kInterleaved && v > 1) continue;
          if (kind == ScheduleKind::kInterleaved && m % p != 0) continue;
          for (P2pDeviceModel model : kModels) {
            INFO(schedule_kind_name(kind) << " p=" << p << " v=" << v << " m=" << m << ", " << model_name(model));
            const std::vector<std::string> errors = check_ordered_p2p(make_all_schedules(kind, p, v, m), model);
            INFO(joined(errors));
            CHECK(errors.empty());
          }
          ++checked;
        }
      }
      for (int v : {1, 2}) {  // evaluation's forward-only lists
        std::vector<std::vector<Action>> lists;
        for (int r = 0; r < p; ++r) lists.push_back(make_forward_only_schedule(p, v, m, r));
        for (P2pDeviceModel model : kModels) {
          INFO("forward-only p=" << p << " v=" << v << " m=" << m << ", " << model_name(model));
          const std::vector<std::string> errors = check_ordered_p2p(lists, model);
          INFO(joined(errors));
          CHECK(errors.empty());
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("two sends issued in the wrong order are a mismatch (the receiver would take the wrong tensor)") {
  std::vector<std::vector<Action>> lists = make_all_schedules(ScheduleKind::kGPipe, 2, 1, 2);
  // Rank 1 (the last stage) sends the gradient of micro-batch 1 before that of micro-batch 0.
  std::vector<Action>& last = lists[1];
  using T = ActionType;
  std::vector<Action> tail = {compute(T::kBackward, 1), act(T::kSendGrad, 1, 0, 0), compute(T::kBackward, 0),
                              act(T::kSendGrad, 0, 0, 0)};
  size_t first_backward = 0;
  while (last[first_backward].type != T::kBackward) ++first_backward;
  last.erase(last.begin() + static_cast<std::ptrdiff_t>(first_backward), last.end());
  last.insert(last.end(), tail.begin(), tail.end());
  const std::vector<std::string> errors = check_ordered_p2p(lists);
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors[0], Catch::Contains("gradient transfer 0 from pp rank 1 to 0") &&
                            Catch::Contains("sends the gradient of micro-batch 1") &&
                            Catch::Contains("expects the gradient of micro-batch 0"));
}

TEST_CASE("a cycle of waits is reported as a deadlock naming where each rank stopped") {
  using T = ActionType;
  // Rank 0 needs micro-batch 0's gradient before it forwards micro-batch 1; rank 1 needs micro-batch
  // 1's activation before it runs the backward that sends that gradient.
  const std::vector<std::vector<Action>> lists = {
      {compute(T::kForward, 0), act(T::kSendActivation, 0, 0, 1), act(T::kRecvGrad, 0, 0, 1),
       compute(T::kBackward, 0), compute(T::kForward, 1), act(T::kSendActivation, 1, 0, 1),
       act(T::kRecvGrad, 1, 0, 1), compute(T::kBackward, 1)},
      {act(T::kRecvActivation, 0, 0, 0), compute(T::kForward, 0), act(T::kRecvActivation, 1, 0, 0),
       compute(T::kForward, 1), compute(T::kBackward, 0), act(T::kSendGrad, 0, 0, 0), compute(T::kBackward, 1),
       act(T::kSendGrad, 1, 0, 0)},
  };
  const std::vector<std::string> errors = check_ordered_p2p(lists);
  INFO(joined(errors));
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], Catch::StartsWith("deadlock: pp rank 0 stops after 1 of 4 computes") &&
                            Catch::Contains("in RecvGrad(mb=0, chunk=0, peer=1) on its receive-gradient lane"));
  CHECK_THAT(errors[1], Catch::StartsWith("deadlock: pp rank 1 stops after 1 of 4 computes") &&
                            Catch::Contains("in RecvActivation(mb=1, chunk=0, peer=0) on its receive-activation lane"));
}

TEST_CASE("with one hardware queue, a receive waiting for its lane holds back the sends queued behind it") {
  using T = ActionType;
  // GPipe, p = 2, m = 2, but rank 0 lists both gradient receives before its first backward: both are
  // issued after F0, ahead of F1 and its send. On concurrent streams the second receive waits on its
  // lane while F1's send goes out. Through one queue it holds the queue until the first receive
  // completes, which needs rank 1's backward 0, which needs F1's activation, queued behind it.
  const std::vector<std::vector<Action>> lists = {
      {compute(T::kForward, 0), act(T::kSendActivation, 0, 0, 1), compute(T::kForward, 1),
       act(T::kSendActivation, 1, 0, 1), act(T::kRecvGrad, 0, 0, 1), act(T::kRecvGrad, 1, 0, 1),
       compute(T::kBackward, 0), compute(T::kBackward, 1)},
      {act(T::kRecvActivation, 0, 0, 0), compute(T::kForward, 0), act(T::kRecvActivation, 1, 0, 0),
       compute(T::kForward, 1), compute(T::kBackward, 0), act(T::kSendGrad, 0, 0, 0), compute(T::kBackward, 1),
       act(T::kSendGrad, 1, 0, 0)},
  };
  CHECK(check_ordered_p2p(lists, P2pDeviceModel::kConcurrentStreams).empty());
  const std::vector<std::string> errors = check_ordered_p2p(lists, P2pDeviceModel::kOneHardwareQueue);
  INFO(joined(errors));
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], Catch::StartsWith("deadlock: pp rank 0 stops after 1 of 4 computes") &&
                            Catch::Contains("its queue holds at RecvGrad(mb=1, chunk=0, peer=1)"));
  CHECK_THAT(errors[1], Catch::StartsWith("deadlock: pp rank 1 stops after 1 of 4 computes") &&
                            Catch::Contains("its queue holds at compute 1"));
}

}  // namespace
}  // namespace lattice
