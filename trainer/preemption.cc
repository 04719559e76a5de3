// Async-signal-safe flag set by SIGTERM / SIGUSR1.
#include "trainer/preemption.h"

#include <atomic>
#include <csignal>

namespace lattice {

namespace {

// Lock-free, so reading and writing it in a signal handler is safe.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_preemption_signal(int signal) {
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
}

}  // namespace

void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads/writes resume instead of failing with EINTR
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

int preemption_signal() { return g_signal.load(); }

const char* preemption_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case 0: return "none";
    default: return "signal";
  }
}

}  // namespace lattice
