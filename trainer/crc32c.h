// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files. Debian
// bookworm ships no C/C++ CRC-32C library (no libcrc32c-dev; its abseil predates absl::crc32c).
#pragma once

#include <cstdint>
#include <string_view>

namespace lattice {

// crc32c("123456789") == 0xE3069283, the standard check value.
uint32_t crc32c(std::string_view data);

}  // namespace lattice
