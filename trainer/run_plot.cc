// Finds tools/plot_runs.py and runs it with python3.
#include "trainer/run_plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kernels/error.h"

extern char** environ;

namespace lattice {

namespace {

namespace fs = std::filesystem;

// Where the script may be, in lookup order.
std::vector<fs::path> script_candidates() {
  std::vector<fs::path> where;
  if (const char* dir = std::getenv("LATTICE_TOOLS_DIR"); dir != nullptr && *dir != '\0')
    where.push_back(fs::path(dir) / "plot_runs.py");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) where.push_back(fs::path(exe.string() + ".runfiles") / "lattice" / "tools" / "plot_runs.py");
  where.push_back(fs::path("tools") / "plot_runs.py");
  return where;
}

}  // namespace

void plot_runs(const std::vector<std::string>& run_dirs, const std::string& png) {
  std::string script, looked;
  for (const fs::path& p : script_candidates()) {
    if (fs::is_regular_file(p)) {
      script = p.string();
      break;
    }
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  if (script.empty()) {
    throw InputError(fmt::format("report --plot: tools/plot_runs.py not found (looked at {}); run from the "
                                 "repository root or set LATTICE_TOOLS_DIR to its tools/ folder",
                                 looked));
  }
  std::vector<std::string> args{"python3", script, "--output", png};
  args.insert(args.end(), run_dirs.begin(), run_dirs.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ); err != 0) {
    throw Error(fmt::format("report --plot: cannot start python3: {}", std::strerror(err)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(fmt::format("report --plot: {} failed ({}); its message is above", script,
                            WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status)) : "killed by a signal"));
  }
}

}  // namespace lattice
