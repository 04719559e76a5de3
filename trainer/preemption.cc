// Async-signal-safe stop flag set by SIGTERM / SIGUSR1 / a first SIGINT; a second SIGINT aborts.
#include "trainer/preemption.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace lattice {

namespace {

// Lock-free, so reading and writing them in a signal handler is safe.
std::atomic<int> g_signal{0};
std::atomic<int> g_interrupts{0};
static_assert(std::atomic<int>::is_always_lock_free);

// write(2) and _exit(2) are async-signal-safe; spdlog and stdio are not.
void say(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, text, n);
}

extern "C" void on_preemption_signal(int signal) {
  if (signal == SIGINT && g_interrupts.fetch_add(1) > 0) {
    say("\nlattice: second SIGINT: aborting now, without saving (committed checkpoints stay intact)\n");
    _exit(128 + SIGINT);
  }
  if (signal == SIGINT)
    say("\nlattice: SIGINT: stopping after the current step and saving a checkpoint (with checkpoint.dir); "
        "press Ctrl-C again to abort without saving\n");
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
  // A SIGINT ignored by whoever started us (nohup, a background job of a script) stays ignored.
  struct sigaction current {};
  sigaction(SIGINT, nullptr, &current);
  if (current.sa_handler != SIG_IGN) sigaction(SIGINT, &action, nullptr);
}

int preemption_signal() { return g_signal.load(); }

const char* preemption_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    case 0: return "none";
    default: return "signal";
  }
}

}  // namespace lattice
