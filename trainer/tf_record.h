// TFRecord framing, the container of TensorBoard event files: each record is a little-endian
// uint64 length, the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lattice {

// TensorFlow's mask: rotate right by 15 and add a constant, so that a CRC of data holding CRCs
// stays well distributed.
uint32_t masked_crc32c(std::string_view data);

// `data` as one framed record, ready to append to a file.
std::string tf_record(std::string_view data);

}  // namespace lattice
