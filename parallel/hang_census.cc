// HangCensus: queries and answers on a duplicate of MPI_COMM_WORLD, and the census's sentences.
#include "parallel/hang_census.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "kernels/error.h"
#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"

namespace lattice {

namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;

// What an answer says: the group and the operation, as the hang message names them.
std::string waiting_text(const OpDescription& op) { return op.group + '\x1f' + op.operation; }

std::string readable(const std::string& text) {
  const size_t cut = text.find('\x1f');
  if (cut == std::string::npos) return text;
  return fmt::format("{} on {}", text.substr(cut + 1), text.substr(0, cut));
}

// "0-3, 5, 7" for sorted world ranks; past `limit` ranks, "... and N more".
std::string rank_ranges(const std::vector<int>& sorted_ranks, size_t limit = 16) {
  std::vector<std::string> parts;
  size_t shown = 0;
  for (size_t i = 0; i < sorted_ranks.size() && shown < limit;) {
    size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", sorted_ranks[i]) : fmt::format("{}-{}", sorted_ranks[i], sorted_ranks[j]));
    shown += j - i + 1;
    i = j + 1;
  }
  std::string out = fmt::format("{}", fmt::join(parts, ", "));
  if (shown < sorted_ranks.size()) out += fmt::format(" and {} more", sorted_ranks.size() - shown);
  return out;
}

}  // namespace

std::shared_ptr<HangCensus> HangCensus::create() {
  int size = 1, level = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_CHECK(MPI_Query_thread(&level));
  if (size < 2 || level < MPI_THREAD_MULTIPLE) return nullptr;
  MPI_Comm comm;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm));
  std::vector<std::string> hosts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const char* begin = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts[static_cast<size_t>(r)] = std::string(begin, strnlen(begin, MPI_MAX_PROCESSOR_NAME));
  }
  return std::shared_ptr<HangCensus>(new HangCensus(comm, std::move(hosts)));
}

HangCensus::HangCensus(MPI_Comm comm, std::vector<std::string> hosts) : comm_(comm), hosts_(std::move(hosts)) {}

HangCensus::~HangCensus() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Answers nobody received (their asker ended the job) are cancelled, not waited for.
  for (Outgoing& o : outgoing_) {
    MPI_Cancel(&o.request);
    MPI_Request_free(&o.request);
  }
  MPI_Comm_free(&comm_);
}

void HangCensus::send_text(const std::string& text, int dst, int tag) {
  while (!outgoing_.empty()) {  // drop the sends that have completed, oldest first
    int done = 0;
    if (MPI_Test(&outgoing_.front().request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) break;
    outgoing_.pop_front();
  }
  Outgoing o{MPI_REQUEST_NULL, std::make_unique<std::string>(text)};
  if (MPI_Isend(o.text->data(), static_cast<int>(o.text->size()), MPI_CHAR, dst, tag, comm_, &o.request) ==
      MPI_SUCCESS) {
    outgoing_.push_back(std::move(o));
  }
}

void HangCensus::answer_locked(const OpDescription& waiting_in) {
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kQueryTag, comm_, &flag, &message, &status) != MPI_SUCCESS || !flag) return;
    char ignored = 0;
    if (MPI_Mrecv(&ignored, 0, MPI_CHAR, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    send_text(waiting_text(waiting_in), status.MPI_SOURCE, kAnswerTag);
  }
}

void HangCensus::answer(const OpDescription& waiting_in) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) answer_locked(waiting_in);  // another waiting thread is answering already
}

std::string HangCensus::ask(const OpDescription& op, double grace_s) {
  if (op.peers.empty()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  const std::set<int> peers(op.peers.begin(), op.peers.end());
  for (int peer : peers) send_text(std::string(), peer, kQueryTag);
  std::map<int, std::string> answers;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
  while (answers.size() < peers.size() && Clock::now() < deadline) {
    answer_locked(op);  // a peer that timed out too asks this rank
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kAnswerTag, comm_, &flag, &message, &status) != MPI_SUCCESS) break;
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string text(static_cast<size_t>(std::max(count, 0)), '\0');
    if (MPI_Mrecv(text.data(), count, MPI_CHAR, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    if (peers.count(status.MPI_SOURCE) != 0) answers[status.MPI_SOURCE] = std::move(text);
  }
  const double asked_s = std::chrono::duration<double>(Clock::now() - start).count();

  const std::string mine = waiting_text(op);
  std::vector<int> same, silent, elsewhere;
  for (int peer : peers) {
    const auto it = answers.find(peer);
    if (it == answers.end()) {
      silent.push_back(peer);
    } else if (it->second == mine) {
      same.push_back(peer);
    } else {
      elsewhere.push_back(peer);
    }
  }
  std::string out = fmt::format(" Asked the {} rank{} it waits for ({:.1f} s):", peers.size(),
                                peers.size() == 1 ? "" : "s", asked_s);
  if (!silent.empty()) {
    // Grouped by host, in rank order: a dead or stuck node shows as one entry.
    std::vector<std::pair<std::string, std::vector<int>>> by_host;
    for (int r : silent) {
      auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& h) { return h.first == host(r); });
      if (it == by_host.end()) {
        by_host.push_back({host(r), {r}});
      } else {
        it->second.push_back(r);
      }
    }
    std::vector<std::string> parts;
    for (size_t i = 0; i < by_host.size() && i < 8; ++i) {
      const auto& [name, ranks] = by_host[i];
      parts.push_back(fmt::format("{} {} on host {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks), name));
    }
    if (by_host.size() > 8) parts.push_back(fmt::format("{} more hosts", by_host.size() - 8));
    out += fmt::format(
        " NO ANSWER from {}: not waiting in any communication (still computing, stuck in I/O or a GPU kernel, or "
        "stopped outside lattice's collectives) — look there first.",
        fmt::join(parts, "; "));
  }
  for (size_t i = 0; i < elsewhere.size() && i < 4; ++i) {
    const int r = elsewhere[i];
    out += fmt::format(" Rank {} (host {}) waits in {}.", r, host(r), readable(answers[r]));
  }
  if (elsewhere.size() > 4) out += fmt::format(" {} more ranks wait in other operations.", elsewhere.size() - 4);
  if (!same.empty()) {
    out += fmt::format(" Waiting in it too: {} {}.", same.size() == 1 ? "rank" : "ranks", rank_ranges(same));
  }
  if (silent.empty() && elsewhere.empty()) {
    out += " Every one of them is in it: no rank is missing (a network or NCCL fault, or an operation slower than the "
           "timeout).";
  }
  return out;
}

}  // namespace lattice
