// Preemption signals: SIGTERM and SIGUSR1 (a scheduler's kill, Slurm's --signal) only set a flag
// here; the training loop asks every rank at the end of each step whether any got one, so that
// all ranks stop after the same step, save a checkpoint and exit 0.
#pragma once

namespace lattice {

// Installs the handlers (idempotent). The second SIGTERM / SIGUSR1 after the first still only
// sets the flag: the save in progress is not interrupted.
void install_preemption_handlers();
// The first signal received (SIGTERM or SIGUSR1), 0 when none.
int preemption_signal();
// "SIGTERM", "SIGUSR1", ...
const char* preemption_signal_name(int signal);

}  // namespace lattice
