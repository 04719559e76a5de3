// HangCensus: when a wait times out, the timed-out rank asks the ranks its operation waits for what
// they are waiting in, so that the hang message names the rank that never joined (and its host)
// instead of leaving the user to compare the logs of every rank. Ranks answer only while they are
// inside a watchdog wait (any communication), so no answer means "not in any communication": still
// computing, stuck in I/O or a kernel, or stopped outside lattice's collectives.
#pragma once

#include <mpi.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lattice {

struct OpDescription;

class HangCensus {
 public:
  // Collective over MPI_COMM_WORLD: duplicates it for the census's messages and gathers every rank's
  // host name. nullptr where no census can run: a one-rank world, or MPI without
  // MPI_THREAD_MULTIPLE (the census answers from whichever thread is waiting).
  static std::shared_ptr<HangCensus> create();
  ~HangCensus();
  HangCensus(const HangCensus&) = delete;
  HangCensus& operator=(const HangCensus&) = delete;

  // Called by every wait while it polls: answers the queries that have arrived with what `waiting_in`
  // is. Cheap when there are none (one MPI_Improbe).
  void answer(const OpDescription& waiting_in);

  // The timed-out rank: asks op.peers, answers others' queries meanwhile, and collects answers for up
  // to grace_s seconds (less once every peer has answered). Returns the sentences that go after
  // the hang message; empty when op.peers is.
  std::string ask(const OpDescription& op, double grace_s);

 private:
  const std::string& host(int world_rank) const { return hosts_.at(static_cast<size_t>(world_rank)); }
  explicit HangCensus(MPI_Comm comm, std::vector<std::string> hosts);
  void send_text(const std::string& text, int dst, int tag);  // nonblocking; the buffer is kept until it completes
  void answer_locked(const OpDescription& waiting_in);

  MPI_Comm comm_;
  std::vector<std::string> hosts_;  // by world rank
  std::mutex mutex_;                // several threads may wait (and answer) at once
  struct Outgoing {
    MPI_Request request;
    std::unique_ptr<std::string> text;
  };
  std::deque<Outgoing> outgoing_;
};

}  // namespace lattice
