#include "parallel/pipeline_executor.h"

#include <chrono>
#include <string>
#include <utility>

#include "kernels/error.h"

namespace lattice {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr int kMaxTag = 32767;  // the smallest MPI_TAG_UB the MPI standard allows

// A buffer that holds an activation or gradient between the action that produces it (a receive, a
// local hand-over, a compute) and the one that consumes it (a compute, a send).
struct Held {
  ActionType kind;  // kRecvActivation / kRecvGrad (inputs), kSendActivation / kSendGrad (outputs)
  int microbatch;
  int chunk;  // the chunk on this rank that consumes (inputs) or produced (outputs) it
  int slot;
  CommHandle recv;  // pending receive (none for a local hand-over or an output)
  bool posted_for_action = false;
};

int find_held(const std::vector<Held>& held, ActionType kind, int microbatch, int chunk) {
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].kind == kind && held[i].microbatch == microbatch && held[i].chunk == chunk) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

PipelineExecutor::PipelineExecutor(Communicator& pp_group, Tracer& tracer) : pp_(pp_group), tracer_(tracer) {}

void PipelineExecutor::reserve(int64_t buffers, const Shape& shape, DType dtype) {
  if (shape != shape_ || dtype != dtype_) {
    for (const Slot& s : pool_) LATTICE_CHECK(!s.in_use, "pipeline buffer pool reshaped while in use");
    pool_.clear();
    shape_ = shape;
    dtype_ = dtype;
  }
  while (static_cast<int64_t>(pool_.size()) < buffers) {
    pool_.push_back(Slot{Tensor::empty(shape_, dtype_), CommHandle(), false});
  }
}

int PipelineExecutor::acquire(int64_t& allocated) {
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (!pool_[i].in_use) {
      pool_[i].in_use = true;
      return static_cast<int>(i);
    }
  }
  // Reclaim a buffer whose send has completed (test() only: never block on a send mid-step).
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (pool_[i].send.pending() && pool_[i].send.test()) return static_cast<int>(i);  // stays in use
  }
  pool_.push_back(Slot{Tensor::empty(shape_, dtype_), CommHandle(), true});
  ++allocated;
  return static_cast<int>(pool_.size()) - 1;
}

void PipelineExecutor::release(int slot) {
  LATTICE_CHECK(!pool_[slot].send.pending(), "released a buffer with a send in flight");
  pool_[slot].in_use = false;
}

PipelineStepStats PipelineExecutor::run(const std::vector<Action>& actions, const std::vector<PipelineStage*>& chunks) {
  const int p = pp_.size();
  const int rank = pp_.rank();
  const int v = static_cast<int>(chunks.size());
  LATTICE_CHECK(v >= 1, "the pipeline executor needs at least one model chunk");
  for (PipelineStage* c : chunks) LATTICE_CHECK(c != nullptr, "null pipeline stage");
  const Shape shape = chunks[0]->activation_shape();
  const DType dtype = chunks[0]->activation_dtype();
  for (int c = 1; c < v; ++c) {
    LATTICE_CHECK(chunks[c]->activation_shape() == shape && chunks[c]->activation_dtype() == dtype,
                  "chunk {} has activation {} {}, chunk 0 {} {}: every chunk must pass the same shape", c,
                  dtype_name(chunks[c]->activation_dtype()), shape_string(chunks[c]->activation_shape()),
                  dtype_name(dtype), shape_string(shape));
  }
  const int last_vs = p * v - 1;

  PipelineStepStats stats;
  reserve(static_cast<int64_t>(pool_.size()), shape, dtype);  // reallocates the pool on a shape change
  int64_t& allocated = stats.buffers_allocated;

  auto tag_for = [&](bool grad, int microbatch, int receiving_chunk) {
    const int64_t tag = (static_cast<int64_t>(microbatch) * v + receiving_chunk) * 2 + (grad ? 1 : 0);
    LATTICE_CHECK(tag <= kMaxTag, "pipeline tag {} for micro-batch {} exceeds {}: too many micro-batches × chunks",
                  tag, microbatch, kMaxTag);
    return static_cast<int>(tag);
  };
  auto check_action = [&](const Action& a) {
    LATTICE_CHECK(a.chunk >= 0 && a.chunk < v && a.microbatch >= 0, "pp rank {}: bad action {} ({} chunks)", rank,
                  to_string(a), v);
  };
  // The peer a send/receive must name, from the virtual-stage layout.
  auto expected_peer = [&](const Action& a) {
    const int vs = virtual_stage(p, rank, a.chunk);
    const bool toward_next = a.type == ActionType::kSendActivation || a.type == ActionType::kRecvGrad;
    const int other = toward_next ? vs + 1 : vs - 1;
    LATTICE_CHECK(other >= 0 && other <= last_vs, "pp rank {}: {} has no peer virtual stage (vs {} of {})", rank,
                  to_string(a), vs, last_vs + 1);
    LATTICE_CHECK(a.peer == other % p, "pp rank {}: {} names peer {}, the layout says {}", rank, to_string(a), a.peer,
                  other % p);
    return other;
  };

  // The whole list is checked before anything runs, so that a wrong peer fails here instead of
  // hanging in a transfer.
  for (const Action& a : actions) {
    check_action(a);
    if (!is_compute(a.type)) expected_peer(a);
  }

  std::vector<Held> held;
  held.reserve(16);

  auto post_recv = [&](const Action& a, bool for_action) {
    expected_peer(a);
    const bool grad = a.type == ActionType::kRecvGrad;
    int idx = find_held(held, a.type, a.microbatch, a.chunk);
    if (a.peer == rank) {  // p == 1: handed over locally by the matching send
      LATTICE_CHECK(!for_action || idx >= 0, "pp rank {}: {} before the local send that feeds it", rank, to_string(a));
      if (idx >= 0) held[idx].posted_for_action = held[idx].posted_for_action || for_action;
      return;
    }
    if (idx >= 0) {
      LATTICE_CHECK(!(for_action && held[idx].posted_for_action), "pp rank {}: duplicate {}", rank, to_string(a));
      held[idx].posted_for_action = held[idx].posted_for_action || for_action;
      return;
    }
    const int slot = acquire(allocated);
    CommHandle h = pp_.recv_async(pool_[slot].tensor, a.peer, tag_for(grad, a.microbatch, a.chunk));
    held.push_back(Held{a.type, a.microbatch, a.chunk, slot, std::move(h), for_action});
  };
  // Takes the received input of a compute (waiting for it), or -1 when the stage has none.
  auto take_input = [&](ActionType recv_kind, const Action& a) {
    const int idx = find_held(held, recv_kind, a.microbatch, a.chunk);
    LATTICE_CHECK(idx >= 0 && held[idx].posted_for_action, "pp rank {}: {} without its {}", rank, to_string(a),
                  action_type_name(recv_kind));
    if (held[idx].recv.pending()) {
      const auto start = Clock::now();
      {
        auto scope = tracer_.scope(recv_kind == ActionType::kRecvGrad ? "recv_grad" : "recv_activation",
                                   "communication", {{"microbatch", a.microbatch}, {"chunk", a.chunk}});
        held[idx].recv.wait();
      }
      stats.recv_wait_s += seconds_since(start);
    }
    const int slot = held[idx].slot;
    held.erase(held.begin() + idx);
    return slot;
  };
  auto send = [&](const Action& a) {
    const int other = expected_peer(a);
    const bool grad = a.type == ActionType::kSendGrad;
    const int idx = find_held(held, a.type, a.microbatch, a.chunk);
    LATTICE_CHECK(idx >= 0, "pp rank {}: {} before the compute that produces it", rank, to_string(a));
    const int slot = held[idx].slot;
    held.erase(held.begin() + idx);
    const int receiving_chunk = other / p;
    if (a.peer == rank) {
      held.push_back(Held{grad ? ActionType::kRecvGrad : ActionType::kRecvActivation, a.microbatch, receiving_chunk,
                          slot, CommHandle(), false});
      return;
    }
    pool_[slot].send = pp_.send_async(pool_[slot].tensor, a.peer, tag_for(grad, a.microbatch, receiving_chunk));
  };
  // Posts the receives that the compute after actions[i] needs, so they overlap this compute.
  auto post_lookahead = [&](size_t i) {
    for (size_t j = i + 1; j < actions.size() && !is_compute(actions[j].type); ++j) {
      if (is_recv(actions[j].type) && actions[j].peer != rank) {
        check_action(actions[j]);
        post_recv(actions[j], false);
      }
    }
  };

  const auto step_start = Clock::now();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    check_action(a);
    const int vs = virtual_stage(p, rank, a.chunk);
    switch (a.type) {
      case ActionType::kRecvActivation:
      case ActionType::kRecvGrad:
        post_recv(a, true);
        break;
      case ActionType::kSendActivation:
      case ActionType::kSendGrad:
        send(a);
        break;
      case ActionType::kForward: {
        post_lookahead(i);
        const int in = vs > 0 ? take_input(ActionType::kRecvActivation, a) : -1;
        const int out = vs < last_vs ? acquire(allocated) : -1;
        Tensor input = in >= 0 ? pool_[in].tensor : Tensor();
        Tensor output = out >= 0 ? pool_[out].tensor : Tensor();
        const auto start = Clock::now();
        {
          auto scope = tracer_.scope("forward", "compute",
                                     {{"step", trace_step_}, {"microbatch", a.microbatch}, {"chunk", a.chunk}});
          chunks[a.chunk]->forward(a.microbatch, input, output);
        }
        stats.forward_s += seconds_since(start);
        ++stats.forwards;
        if (in >= 0) release(in);
        if (out >= 0) held.push_back(Held{ActionType::kSendActivation, a.microbatch, a.chunk, out, CommHandle(), true});
        break;
      }
      case ActionType::kBackward: {
        post_lookahead(i);
        const int in = vs < last_vs ? take_input(ActionType::kRecvGrad, a) : -1;
        const int out = vs > 0 ? acquire(allocated) : -1;
        Tensor grad_output = in >= 0 ? pool_[in].tensor : Tensor();
        Tensor grad_input = out >= 0 ? pool_[out].tensor : Tensor();
        const auto start = Clock::now();
        {
          auto scope = tracer_.scope("backward", "compute",
                                     {{"step", trace_step_}, {"microbatch", a.microbatch}, {"chunk", a.chunk}});
          chunks[a.chunk]->backward(a.microbatch, grad_output, grad_input);
        }
        stats.backward_s += seconds_since(start);
        ++stats.backwards;
        if (in >= 0) release(in);
        if (out >= 0) held.push_back(Held{ActionType::kSendGrad, a.microbatch, a.chunk, out, CommHandle(), true});
        break;
      }
    }
  }

  // End of step: every send completes, and every buffer is back in the pool.
  {
    const auto start = Clock::now();
    for (Slot& s : pool_) {
      if (s.send.pending()) {
        auto scope = tracer_.scope("send_wait", "communication");
        s.send.wait();
      }
    }
    stats.send_wait_s += seconds_since(start);
  }
  if (!held.empty()) {
    std::string what;
    for (Held& h : held) {
      what += fmt::format("{}{}(mb={}, chunk={})", what.empty() ? "" : ", ", action_type_name(h.kind), h.microbatch,
                          h.chunk);
      if (h.recv.pending()) {
        // A receive nobody consumes: the schedule is inconsistent. Let the peer's send complete.
        h.recv.wait();
      }
    }
    for (const Held& h : held) pool_[h.slot].in_use = false;
    throw Error(fmt::format("pp rank {}: the action list left transfers without their other half: {}", rank, what));
  }
  for (Slot& s : pool_) s.in_use = false;
  stats.step_s = seconds_since(step_start);
  stats.buffers = pool_size();
  return stats;
}

double measured_bubble(const PipelineStepStats& stats, Communicator& pp_group) {
  Tensor compute = Tensor::empty({1}, DType::kF32);
  Tensor step = Tensor::empty({1}, DType::kF32);
  compute.f32()[0] = static_cast<float>(stats.compute_s());
  step.f32()[0] = static_cast<float>(stats.step_s);
  pp_group.all_reduce(compute, ReduceOp::kSum);
  pp_group.all_reduce(step, ReduceOp::kMax);
  const double makespan = step.f32()[0];
  if (makespan <= 0) return 0.0;
  return 1.0 - static_cast<double>(compute.f32()[0]) / (pp_group.size() * makespan);
}

PipelineStepStats run_schedule(const std::vector<Action>& actions, std::vector<PipelineStage*> chunks,
                               Communicator& pp_group, Tracer& tracer) {
  PipelineExecutor executor(pp_group, tracer);
  return executor.run(actions, chunks);
}

}  // namespace lattice
