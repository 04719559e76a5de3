// The pipeline executor: one method per action kind over a step's shared state, a pool of transfer
// buffers, and the measured bubble over the pp group's host channel.
#include "parallel/pipeline_executor.h"

#include <string>
#include <utility>

#include "kernels/error.h"

namespace lattice {
namespace {

constexpr int kMaxTag = 32767;  // the smallest MPI_TAG_UB the MPI standard allows

}  // namespace

// A buffer that holds an activation or gradient between the action that produces it (a receive, a
// local hand-over, a compute) and the one that consumes it (a compute, a send).
struct PipelineExecutor::Held {
  ActionType kind;  // kRecvActivation / kRecvGrad (inputs), kSendActivation / kSendGrad (outputs)
  int microbatch;
  int chunk;  // the chunk on this rank that consumes (inputs) or produced (outputs) it
  int slot;
  CommHandle recv;  // pending receive (none for a local hand-over or an output)
  bool posted_for_action = false;
};

// One run's shared state.
struct PipelineExecutor::Step {
  const std::vector<Action>& actions;
  const std::vector<PipelineStage*>& chunks;
  int p;
  int rank;
  int v;        // chunks on this rank
  int last_vs;  // the last virtual stage, p · v - 1
  std::vector<Held> held;
  PipelineStepTiming timing;
  TraceAnchor anchor;  // places the step's event-timed spans on the trace

  int find(ActionType kind, int microbatch, int chunk) const {
    for (size_t i = 0; i < held.size(); ++i) {
      if (held[i].kind == kind && held[i].microbatch == microbatch && held[i].chunk == chunk) return static_cast<int>(i);
    }
    return -1;
  }
};

PipelineExecutor::PipelineExecutor(Communicator& pp_group, Tracer& tracer, const DeviceContext& ctx, bool ordered_p2p)
    : pp_(pp_group), tracer_(tracer), ctx_(ctx) {
  if ((ordered_p2p || pp_group.ordered_p2p()) && pp_group.size() > 1)
    lanes_ = std::make_unique<PipelineLanes>(pp_group, ctx);
}

PipelineExecutor::~PipelineExecutor() = default;

void PipelineExecutor::reserve(int64_t buffers, const Shape& shape, DType dtype) {
  if (shape != shape_ || dtype != dtype_) {
    for (const Slot& s : pool_) LATTICE_CHECK(!s.in_use, "pipeline buffer pool reshaped while in use");
    pool_.clear();
    shape_ = shape;
    dtype_ = dtype;
  }
  while (static_cast<int64_t>(pool_.size()) < buffers) {
    pool_.push_back(Slot{ctx_.empty(shape_, dtype_), CommHandle(), false});
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
  pool_.push_back(Slot{ctx_.empty(shape_, dtype_), CommHandle(), true});
  ++allocated;
  return static_cast<int>(pool_.size()) - 1;
}

void PipelineExecutor::release(int slot) {
  LATTICE_CHECK(!pool_[slot].send.pending(), "released a buffer with a send in flight");
  pool_[slot].in_use = false;
}

Tensor PipelineExecutor::buffer(int slot) const { return slot >= 0 ? pool_[slot].tensor : Tensor(); }

PipelineStepStats PipelineStepTiming::stats() const {
  PipelineStepStats s = counts;
  s.forward_s = forward.seconds();
  s.backward_s = backward.seconds();
  s.recv_wait_s = recv_wait.seconds();
  s.send_wait_s = send_wait.seconds();
  s.step_s = end.seconds_since(start);
  return s;
}

PipelineStepTiming PipelineExecutor::run(const std::vector<Action>& actions,
                                         const std::vector<PipelineStage*>& chunks) {
  Step s = begin_step(actions, chunks);
  // Ordered: in the host order p2p_order.h proves (on lanes p >= 2, so there are no local hand-overs
  // for it to leave out); otherwise in list order.
  std::vector<size_t> order;
  if (lanes_ != nullptr) {
    order = p2p_host_order(actions, s.rank);
  } else {
    for (size_t i = 0; i < actions.size(); ++i) order.push_back(i);
  }
  for (size_t i : order) {
    const Action& a = actions[i];
    switch (a.type) {
      case ActionType::kRecvActivation:
      case ActionType::kRecvGrad: post_recv(s, a, true); break;
      case ActionType::kSendActivation:
      case ActionType::kSendGrad: send(s, a); break;
      case ActionType::kForward: forward(s, i); break;
      case ActionType::kBackward: backward(s, i); break;
    }
  }
  end_step(s);
  return s.timing;
}

PipelineExecutor::Step PipelineExecutor::begin_step(const std::vector<Action>& actions,
                                                    const std::vector<PipelineStage*>& chunks) {
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
  reserve(static_cast<int64_t>(pool_.size()), shape, dtype);  // reallocates the pool on a shape change
  Step s{actions, chunks, pp_.size(), pp_.rank(), v, pp_.size() * v - 1, {}, {}, {}};
  // The whole list is checked before anything runs, so that a wrong peer fails here instead of
  // hanging in a transfer.
  for (const Action& a : actions) {
    check_action(s, a);
    if (!is_compute(a.type)) expected_peer(s, a);
  }
  s.held.reserve(16);
  s.anchor = trace_anchor_.event.recorded() ? trace_anchor_ : tracer_.anchor(ctx_.stream());
  s.timing.start = ctx_.stream().record();
  return s;
}

void PipelineExecutor::check_action(const Step& s, const Action& a) const {
  LATTICE_CHECK(a.chunk >= 0 && a.chunk < s.v && a.microbatch >= 0, "pp rank {}: bad action {} ({} chunks)", s.rank,
                to_string(a), s.v);
}

int PipelineExecutor::expected_peer(const Step& s, const Action& a) const {
  const int vs = virtual_stage(s.p, s.rank, a.chunk);
  const bool toward_next = a.type == ActionType::kSendActivation || a.type == ActionType::kRecvGrad;
  const int other = toward_next ? vs + 1 : vs - 1;
  LATTICE_CHECK(other >= 0 && other <= s.last_vs, "pp rank {}: {} has no peer virtual stage (vs {} of {})", s.rank,
                to_string(a), vs, s.last_vs + 1);
  LATTICE_CHECK(a.peer == other % s.p, "pp rank {}: {} names peer {}, the layout says {}", s.rank, to_string(a),
                a.peer, other % s.p);
  return other;
}

int PipelineExecutor::tag_for(const Step& s, bool grad, int microbatch, int receiving_chunk) const {
  const int64_t tag = (static_cast<int64_t>(microbatch) * s.v + receiving_chunk) * 2 + (grad ? 1 : 0);
  LATTICE_CHECK(tag <= kMaxTag, "pipeline tag {} for micro-batch {} exceeds {}: too many micro-batches × chunks", tag,
                microbatch, kMaxTag);
  return static_cast<int>(tag);
}

void PipelineExecutor::post_recv(Step& s, const Action& a, bool for_action) {
  expected_peer(s, a);
  const int idx = s.find(a.type, a.microbatch, a.chunk);
  if (a.peer == s.rank) {  // p == 1: handed over locally by the matching send
    LATTICE_CHECK(!for_action || idx >= 0, "pp rank {}: {} before the local send that feeds it", s.rank, to_string(a));
    if (idx >= 0) s.held[idx].posted_for_action = s.held[idx].posted_for_action || for_action;
    return;
  }
  if (idx >= 0) {
    LATTICE_CHECK(!(for_action && s.held[idx].posted_for_action), "pp rank {}: duplicate {}", s.rank, to_string(a));
    s.held[idx].posted_for_action = s.held[idx].posted_for_action || for_action;
    return;
  }
  const int slot = acquire(s.timing.counts.buffers_allocated);
  const bool grad = a.type == ActionType::kRecvGrad;
  CommHandle h = lanes_ != nullptr
                     ? lanes_->transfer_async(a.type, pool_[slot].tensor)
                     : pp_.recv_async(pool_[slot].tensor, a.peer, tag_for(s, grad, a.microbatch, a.chunk));
  s.held.push_back(Held{a.type, a.microbatch, a.chunk, slot, std::move(h), for_action});
}

void PipelineExecutor::send(Step& s, const Action& a) {
  const int other = expected_peer(s, a);
  const bool grad = a.type == ActionType::kSendGrad;
  const int idx = s.find(a.type, a.microbatch, a.chunk);
  LATTICE_CHECK(idx >= 0, "pp rank {}: {} before the compute that produces it", s.rank, to_string(a));
  const int slot = s.held[idx].slot;
  s.held.erase(s.held.begin() + idx);
  const int receiving_chunk = other / s.p;
  if (a.peer == s.rank) {
    s.held.push_back(Held{grad ? ActionType::kRecvGrad : ActionType::kRecvActivation, a.microbatch, receiving_chunk,
                          slot, CommHandle(), false});
    return;
  }
  pool_[slot].send = lanes_ != nullptr
                         ? lanes_->transfer_async(a.type, pool_[slot].tensor)
                         : pp_.send_async(pool_[slot].tensor, a.peer, tag_for(s, grad, a.microbatch, receiving_chunk));
}

template <class Work>
void PipelineExecutor::timed(const Step& s, DeviceTimeSum& sum, const char* name, const char* category, NvtxKind kind,
                             TraceArgs args, Work&& work) {
  const NvtxRange range(trace_label(name, args), kind);
  const Event start = ctx_.stream().record();
  work();
  const Event end = ctx_.stream().record();
  tracer_.span(name, category, s.anchor, start, end, args);
  sum.add(start, end);
}

void PipelineExecutor::forward(Step& s, size_t i) {
  const Action& a = s.actions[i];
  const int vs = virtual_stage(s.p, s.rank, a.chunk);
  post_lookahead(s, i);
  const int in = vs > 0 ? take_input(s, ActionType::kRecvActivation, a) : -1;
  const int out = vs < s.last_vs ? acquire(s.timing.counts.buffers_allocated) : -1;
  const TraceArgs args = {{"step", trace_step_}, {"microbatch", a.microbatch}, {"chunk", a.chunk}};
  Tensor input = buffer(in), output = buffer(out);
  timed(s, s.timing.forward, "forward", "compute", NvtxKind::kForward, args,
        [&] { s.chunks[a.chunk]->forward(a.microbatch, input, output); });
  ++s.timing.counts.forwards;
  end_compute(s, a, in, out, ActionType::kSendActivation);
}

void PipelineExecutor::backward(Step& s, size_t i) {
  const Action& a = s.actions[i];
  const int vs = virtual_stage(s.p, s.rank, a.chunk);
  post_lookahead(s, i);
  const int in = vs < s.last_vs ? take_input(s, ActionType::kRecvGrad, a) : -1;
  const int out = vs > 0 ? acquire(s.timing.counts.buffers_allocated) : -1;
  const TraceArgs args = {{"step", trace_step_}, {"microbatch", a.microbatch}, {"chunk", a.chunk}};
  Tensor grad_output = buffer(in), grad_input = buffer(out);
  timed(s, s.timing.backward, "backward", "compute", NvtxKind::kBackward, args,
        [&] { s.chunks[a.chunk]->backward(a.microbatch, grad_output, grad_input); });
  ++s.timing.counts.backwards;
  end_compute(s, a, in, out, ActionType::kSendGrad);
}

void PipelineExecutor::post_lookahead(Step& s, size_t i) {
  if (lanes_ != nullptr) return;  // ordered: receives are issued in lane order
  for (size_t j = i + 1; j < s.actions.size() && !is_compute(s.actions[j].type); ++j) {
    const Action& next = s.actions[j];
    if (is_recv(next.type) && next.peer != s.rank) {
      check_action(s, next);
      post_recv(s, next, false);
    }
  }
}

int PipelineExecutor::take_input(Step& s, ActionType recv_kind, const Action& a) {
  const int idx = s.find(recv_kind, a.microbatch, a.chunk);
  LATTICE_CHECK(idx >= 0 && s.held[idx].posted_for_action, "pp rank {}: {} without its {}", s.rank, to_string(a),
                action_type_name(recv_kind));
  if (s.held[idx].recv.pending()) {
    const char* name = recv_kind == ActionType::kRecvGrad ? "recv_grad" : "recv_activation";
    const TraceArgs args = {{"microbatch", a.microbatch}, {"chunk", a.chunk}};
    timed(s, s.timing.recv_wait, name, "communication", NvtxKind::kCommunication, args,
          [&] { s.held[idx].recv.wait_on(ctx_.stream()); });
  }
  const int slot = s.held[idx].slot;
  s.held.erase(s.held.begin() + idx);
  return slot;
}

void PipelineExecutor::end_compute(Step& s, const Action& a, int in, int out, ActionType out_kind) {
  if (in >= 0) release(in);
  if (out >= 0) s.held.push_back(Held{out_kind, a.microbatch, a.chunk, out, CommHandle(), true});
}

void PipelineExecutor::end_step(Step& s) {
  // Every send completes (the host waits: the buffers go back to the pool), and every buffer is
  // back in the pool.
  const Event start = ctx_.stream().record();
  for (Slot& slot : pool_) {
    if (slot.send.pending()) {
      const NvtxRange range("send_wait", NvtxKind::kCommunication);
      auto scope = tracer_.scope("send_wait", "communication");
      slot.send.wait();
    }
  }
  s.timing.send_wait.add(start, ctx_.stream().record());
  if (!s.held.empty()) {
    std::string what;
    for (Held& h : s.held) {
      what += fmt::format("{}{}(mb={}, chunk={})", what.empty() ? "" : ", ", action_type_name(h.kind), h.microbatch,
                          h.chunk);
      // A receive nobody consumes: the schedule is inconsistent. Let the peer's send complete.
      if (h.recv.pending()) h.recv.wait();
    }
    for (const Held& h : s.held) pool_[h.slot].in_use = false;
    throw Error(fmt::format("pp rank {}: the action list left transfers without their other half: {}", s.rank, what));
  }
  for (Slot& slot : pool_) slot.in_use = false;
  s.timing.end = ctx_.stream().record();
  s.timing.counts.buffers = pool_size();
}

double measured_bubble(const PipelineStepStats& stats, Communicator& pp_group) {
  HostChannel& host = pp_group.host();
  const double makespan = host.max(stats.step_s, "pipeline step time");
  if (makespan <= 0) return 0.0;
  double compute = 0.0;
  for (double c : host.all_gather(stats.compute_s(), "pipeline compute time")) compute += c;
  return 1.0 - compute / (pp_group.size() * makespan);
}

}  // namespace lattice
