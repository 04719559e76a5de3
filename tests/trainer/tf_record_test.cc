// CRC-32C, TFRecord framing and the event message encoding against published values and bytes
// written by the tensorboard package's own RecordWriter and event_pb2 (PyPI tensorboard 2.21).
#include <string>

#include <catch2/catch.hpp>

#include "trainer/crc32c.h"
#include "trainer/tensorboard_event.pb.h"
#include "trainer/tf_record.h"

namespace lattice {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST_CASE("crc32c matches the standard check value and RFC 3720's test vectors") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(crc32c(descending) == 0x113FDB5Cu);
}

TEST_CASE("masked crc32c is TensorFlow's rotation plus constant") {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, as tensorboard's masked_crc32c gives.
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);
}

TEST_CASE("tf_record frames data exactly as tensorboard's RecordWriter does") {
  CHECK(tf_record("") == from_hex("000000000000000029039807d8ea82a2"));
  CHECK(tf_record("hello") == from_hex("0500000000000000eab2043e68656c6c6fbb1f1c19"));
}

TEST_CASE("event messages encode with TensorBoard's field numbers, a zero scalar included") {
  tensorboard::Event version;
  version.set_wall_time(1.5);
  version.set_file_version("brain.Event:2");
  CHECK(version.SerializeAsString() == from_hex("09000000000000f83f1a0d627261696e2e4576656e743a32"));

  tensorboard::Event scalar;
  scalar.set_wall_time(1.5);
  scalar.set_step(7);
  tensorboard::Summary::Value* v = scalar.mutable_summary()->add_value();
  v->set_tag("train/loss");
  v->set_simple_value(0.0f);
  CHECK(scalar.SerializeAsString() == from_hex("09000000000000f83f10072a130a110a0a747261696e2f6c6f73731500000000"));

  tensorboard::Event start;
  start.set_wall_time(1.5);
  start.set_step(5);
  start.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  CHECK(start.SerializeAsString() == from_hex("09000000000000f83f10053a020801"));
}

}  // namespace
}  // namespace lattice
