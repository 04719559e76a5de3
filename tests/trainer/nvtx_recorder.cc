// An NVTX injection library: what Nsight Systems attaches through NVTX_INJECTION64_PATH, for
// tests/trainer/nvtx_ranges_test.sh. It takes over the domain calls lattice makes
// (kernels/nvtx_range.cc: nvtxDomainCreateA, nvtxDomainRangePushEx, nvtxDomainRangePop) and writes
// one line per call to the file NVTX_RECORD_FILE names (each "%p" in it replaced by the process id,
// one file per rank under mpirun):
//   <thread id> push <domain> <message>
//   <thread id> pop <domain>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <sys/syscall.h>
#include <unistd.h>

#define NVTX_NO_IMPL  // a tool: the types and callback ids, not the calls
#include <nvtx3/nvToolsExt.h>

namespace {

std::mutex mutex;
FILE* out = nullptr;

struct Domain {
  std::string name;
};

const char* name_of(nvtxDomainHandle_t domain) {
  return domain != nullptr ? reinterpret_cast<const Domain*>(domain)->name.c_str() : "(none)";
}

long thread_id() { return syscall(SYS_gettid); }

nvtxDomainHandle_t create_domain(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name});  // lives as long as the process
}

int push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  const bool ascii = attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII;
  const std::lock_guard lock(mutex);
  std::fprintf(out, "%ld push %s %s\n", thread_id(), name_of(domain), ascii ? attributes->message.ascii : "(no text)");
  return 0;
}

int pop(nvtxDomainHandle_t domain) {
  const std::lock_guard lock(mutex);
  std::fprintf(out, "%ld pop %s\n", thread_id(), name_of(domain));
  return 0;
}

template <class F>
void take(NvtxFunctionTable table, unsigned size, unsigned id, F* f) {
  if (id < size) *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
}

}  // namespace

// NVTX calls this once, on the first NVTX call of the process; nonzero: the tool is attached.
extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const char* pattern = std::getenv("NVTX_RECORD_FILE");
  if (pattern == nullptr) return 0;
  std::string path = pattern;
  for (size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p", at))
    path.replace(at, 2, std::to_string(getpid()));
  if ((out = std::fopen(path.c_str(), "w")) == nullptr) return 0;
  std::setvbuf(out, nullptr, _IOLBF, 0);  // each line reaches the file as it is written
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (callbacks == nullptr || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  take(table, size, NVTX_CBID_CORE2_DomainCreateA, &create_domain);
  take(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &push);
  take(table, size, NVTX_CBID_CORE2_DomainRangePop, &pop);
  return 1;
}
