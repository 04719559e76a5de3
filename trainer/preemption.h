// Preemption signals: SIGTERM and SIGUSR1 (a scheduler's kill, Slurm's --signal) and a first SIGINT
// (Ctrl-C) only set a flag here; the training loop asks every rank at the end of each step whether
// any got one, so that all ranks stop after the same step, save a checkpoint and exit 0.
#pragma once

namespace lattice {

// Installs the handlers (idempotent). The second SIGTERM / SIGUSR1 after the first still only
// sets the flag: the save in progress is not interrupted. The first SIGINT says on stderr that the
// run stops after the current step and saves; a second SIGINT ends the process at once with exit
// 130 (128 + SIGINT), without saving. A SIGINT that was ignored when the process started (nohup, a
// script's background job) stays ignored.
void install_preemption_handlers();
// The first signal received (SIGTERM, SIGUSR1 or SIGINT), 0 when none.
int preemption_signal();
// "SIGTERM", "SIGUSR1", "SIGINT", ...
const char* preemption_signal_name(int signal);

}  // namespace lattice
