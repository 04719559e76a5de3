// NVTX ranges through the CUDA toolkit's header-only nvtx3 (LATTICE_NVTX, set by --config=cuda).
#include "kernels/nvtx_range.h"

#include <cstdint>

#ifdef LATTICE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace lattice {

#ifdef LATTICE_NVTX
namespace {

// One domain for the process, so nsys groups and filters our ranges apart from other libraries'.
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("lattice");
  return d;
}

uint32_t argb(NvtxKind kind) {
  switch (kind) {
    case NvtxKind::kStep: return 0xFF607D8Bu;           // blue grey
    case NvtxKind::kForward: return 0xFF43A047u;        // green
    case NvtxKind::kBackward: return 0xFF1E88E5u;       // blue
    case NvtxKind::kOp: return 0xFFB0BEC5u;             // light grey
    case NvtxKind::kOptimizer: return 0xFFFB8C00u;      // orange
    case NvtxKind::kCommunication: return 0xFFE53935u;  // red
    case NvtxKind::kData: return 0xFF6D4C41u;           // brown
    case NvtxKind::kEvaluation: return 0xFF8E24AAu;     // purple
  }
  return 0xFF000000u;
}

}  // namespace

NvtxRange::NvtxRange(const char* message, NvtxKind kind) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.colorType = NVTX_COLOR_ARGB;
  attributes.color = argb(kind);
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  nvtxDomainRangePushEx(domain(), &attributes);
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(domain()); }

#else

NvtxRange::NvtxRange(const char*, NvtxKind) {}
NvtxRange::~NvtxRange() = default;

#endif

}  // namespace lattice
