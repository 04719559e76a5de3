// safetensors reader/writer: round trips, interop with the reference Python library, and every
// kind of malformed file ending in an InputError that names the file (and tensor).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <catch2/catch.hpp>

#include "checkpoint/safetensors.h"
#include "kernels/error.h"
#include "tests/checkpoint/python_helper.h"

using namespace lattice;
using lattice::testing::run_script_ok;
using lattice::testing::test_tmpdir;

namespace {

Tensor make_f32(const Shape& shape, float start, float step) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = start + step * static_cast<float>(i);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file from a header string and a data buffer, without going through our writer.
std::string raw_file(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

// Runs the reader on `bytes` and returns the InputError's message ("" if it did not throw one).
std::string reader_error(const std::string& name, const std::string& bytes) {
  const std::string path = test_tmpdir() + "/" + name;
  spit(path, bytes);
  try {
    SafetensorsFile f(path);
  } catch (const InputError& e) {
    CHECK(e.code() == ExitCode::kBadInput);
    return e.what();
  }
  return "";
}

std::map<std::string, Tensor> sample_tensors() {
  std::map<std::string, Tensor> t;
  t["alpha"] = Tensor::empty({3});
  t["alpha"].f32()[0] = 0.5f;
  t["alpha"].f32()[1] = -1.25f;
  t["alpha"].f32()[2] = 3.0f;
  t["beta"] = make_f32({2, 3}, 0.0f, 0.25f);
  t["gamma"] = make_f32({2, 3, 4}, -12.0f, 1.0f);
  t["scalar"] = Tensor::empty({});
  t["scalar"].f32()[0] = 7.5f;
  t["ids"] = Tensor::empty({4}, DType::kI32);
  int32_t ids[4] = {1, -2, 3, 2147483647};
  std::memcpy(t["ids"].raw(), ids, sizeof ids);
  t["empty"] = Tensor::empty({0, 3});
  return t;
}

}  // namespace

TEST_CASE("safetensors round trip keeps shapes, values, metadata and is 8-byte aligned") {
  const std::string path = test_tmpdir() + "/roundtrip.safetensors";
  auto tensors = sample_tensors();
  write_safetensors(path, tensors, {{"format", "pt"}, {"step", "42"}});
  REQUIRE_FALSE(std::filesystem::exists(path + ".tmp"));

  SafetensorsFile f(path);
  REQUIRE(f.names() == std::vector<std::string>{"alpha", "beta", "empty", "gamma", "ids", "scalar"});
  REQUIRE(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"step", "42"}});
  for (const auto& [name, t] : tensors) {
    INFO(name);
    Tensor back = t.dtype() == DType::kI32 ? f.read_i32(name) : f.read_f32(name);
    REQUIRE(same_bits(back, t));
  }
  REQUIRE(f.entry("gamma").dtype == "F32");
  REQUIRE(f.entry("ids").dtype == "I32");
  REQUIRE(f.entry("scalar").shape.empty());

  const std::string bytes = slurp(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  REQUIRE(n % 8 == 0);
  REQUIRE(bytes[8 + n - 1] != '\0');
  // Deterministic: writing the same tensors again gives the same bytes.
  write_safetensors(path, tensors, {{"format", "pt"}, {"step", "42"}});
  REQUIRE(slurp(path) == bytes);

  std::map<std::string, std::string> meta;
  auto all = read_safetensors(path, &meta);
  REQUIRE(all.size() == tensors.size());
  REQUIRE(same_bits(all.at("ids"), tensors.at("ids")));
  REQUIRE(same_bits(all.at("gamma"), tensors.at("gamma")));
  REQUIRE(meta.at("step") == "42");
}

TEST_CASE("our writer is readable by the Python safetensors library") {
  const std::string path = test_tmpdir() + "/ours_for_python.safetensors";
  write_safetensors(path, sample_tensors(), {{"format", "pt"}, {"step", "42"}});
  run_script_ok("check-ours '" + path + "'");
}

TEST_CASE("files written by the Python safetensors library read back exactly (F32, I32, F16)") {
  const std::string f32 = test_tmpdir() + "/py_basic_f32.safetensors";
  const std::string f16 = test_tmpdir() + "/py_basic_f16.safetensors";
  run_script_ok("basic '" + f32 + "' '" + f16 + "'");

  SafetensorsFile a(f32);
  REQUIRE(a.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"source", "python"}});
  REQUIRE(a.names() == std::vector<std::string>{"cube", "ids", "mat", "scalar", "vec"});
  Tensor vec = a.read_f32("vec");
  REQUIRE(vec.shape() == Shape{3});
  REQUIRE(vec.f32()[0] == 1.5f);
  REQUIRE(vec.f32()[1] == -2.0f);
  REQUIRE(vec.f32()[2] == 0.25f);
  REQUIRE(same_bits(a.read_f32("mat"), make_f32({2, 3}, -1.0f, 0.5f)));
  REQUIRE(same_bits(a.read_f32("cube"), make_f32({2, 3, 4}, -12.0f, 1.0f)));
  Tensor scalar = a.read_f32("scalar");
  REQUIRE(scalar.shape().empty());
  REQUIRE(scalar.f32()[0] == 3.25f);
  Tensor ids = a.read_i32("ids");
  REQUIRE(ids.i32()[0] == 1);
  REQUIRE(ids.i32()[1] == -2);
  REQUIRE(ids.i32()[2] == 2147483647);
  REQUIRE_THROWS_AS(a.read_f32("ids"), InputError);
  REQUIRE_THROWS_AS(a.read_i32("vec"), InputError);
  REQUIRE_THROWS_WITH(a.read_f32("nope"), Catch::Contains("nope") && Catch::Contains(f32));

  SafetensorsFile b(f16);
  REQUIRE(b.entry("half").dtype == "F16");
  Tensor h = b.read_f32("half");
  REQUIRE(h.f32()[0] == 1.0f);
  REQUIRE(h.f32()[1] == -0.5f);
  REQUIRE(h.f32()[2] == std::ldexp(1.0f, -24));
  REQUIRE(h.f32()[3] == 0.0f);
  REQUIRE(std::signbit(h.f32()[3]));
  REQUIRE(h.f32()[4] == 65504.0f);
  REQUIRE(h.f32()[5] == std::numeric_limits<float>::infinity());
  REQUIRE(same_bits(b.read_f32("half2d"), make_f32({3, 4}, 0.0f, 0.125f)));
}

TEST_CASE("half and bfloat16 widen exactly") {
  REQUIRE(half_to_float(0x3c00) == 1.0f);
  REQUIRE(half_to_float(0xc000) == -2.0f);
  REQUIRE(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  REQUIRE(half_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  REQUIRE(half_to_float(0x7bff) == 65504.0f);
  REQUIRE(std::isnan(half_to_float(0x7e00)));
  REQUIRE(bfloat16_to_float(0x3f80) == 1.0f);
  REQUIRE(bfloat16_to_float(0xc0a0) == -5.0f);
  REQUIRE(bfloat16_to_float(0x7f80) == std::numeric_limits<float>::infinity());
}

TEST_CASE("BF16 tensors read as f32") {
  // Hand-made: numpy has no bfloat16. [1.0, -5.0, 0.5]
  const uint16_t v[3] = {0x3f80, 0xc0a0, 0x3f00};
  std::string data(reinterpret_cast<const char*>(v), 6);
  std::string path = test_tmpdir() + "/bf16.safetensors";
  spit(path, raw_file(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})", data));
  Tensor t = SafetensorsFile(path).read_f32("w");
  REQUIRE(t.f32()[0] == 1.0f);
  REQUIRE(t.f32()[1] == -5.0f);
  REQUIRE(t.f32()[2] == 0.5f);
}

TEST_CASE("bf16 tensors round trip as BF16 and widen with read_f32") {
  const std::string path = test_tmpdir() + "/bf16_roundtrip.safetensors";
  Tensor w = Tensor::empty({2, 2}, DType::kBF16);
  const uint16_t bits[4] = {0x3f80, 0xc0a0, 0x7fc0, 0x0001};  // 1, -5, NaN, smallest subnormal
  std::memcpy(w.raw(), bits, sizeof bits);
  write_safetensors(path, {{"w", w}, {"ids", make_f32({1}, 2.0f, 0.0f)}});
  SafetensorsFile f(path);
  REQUIRE(f.entry("w").dtype == "BF16");
  REQUIRE(f.entry("w").end - f.entry("w").begin == 8);
  Tensor back = f.read("w");
  REQUIRE(back.dtype() == DType::kBF16);
  REQUIRE(back.shape() == Shape{2, 2});
  REQUIRE(std::memcmp(back.raw(), bits, sizeof bits) == 0);
  REQUIRE(read_safetensors(path).at("w").dtype() == DType::kBF16);
  REQUIRE(f.read("ids").dtype() == DType::kF32);
  Tensor wide = f.read_f32("w");
  REQUIRE(wide.f32()[1] == -5.0f);
  REQUIRE(std::isnan(wide.f32()[2]));
  REQUIRE(wide.f32()[3] == std::ldexp(1.0f, -133));
}

TEST_CASE("malformed safetensors files are InputErrors naming the file and tensor") {
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data8(8, '\0');
  REQUIRE(reader_error("ok.safetensors", raw_file(good_header, data8)).empty());

  SECTION("missing file") {
    const std::string path = test_tmpdir() + "/does_not_exist.safetensors";
    REQUIRE_THROWS_WITH(SafetensorsFile(path), Catch::Contains(path) && Catch::Contains("cannot open"));
  }
  SECTION("shorter than the length prefix") {
    REQUIRE_THAT(reader_error("tiny.safetensors", "abc"),
                 Catch::Contains("tiny.safetensors") && Catch::Contains("truncated"));
  }
  SECTION("truncated data") {
    std::string bytes = raw_file(good_header, data8);
    bytes.resize(bytes.size() - 3);
    REQUIRE_THAT(reader_error("trunc.safetensors", bytes),
                 Catch::Contains("trunc.safetensors") && Catch::Contains("'a'") && Catch::Contains("past"));
  }
  SECTION("header length beyond the file") {
    std::string bytes = raw_file(good_header, data8);
    uint64_t n = 4096;
    std::memcpy(bytes.data(), &n, 8);
    REQUIRE_THAT(reader_error("hlen.safetensors", bytes),
                 Catch::Contains("hlen.safetensors") && Catch::Contains("header length 4096"));
  }
  SECTION("absurd header length") {
    std::string bytes = raw_file(good_header, data8);
    uint64_t n = ~0ull;
    std::memcpy(bytes.data(), &n, 8);
    REQUIRE_THAT(reader_error("huge.safetensors", bytes), Catch::Contains("huge.safetensors"));
  }
  SECTION("bad JSON") {
    REQUIRE_THAT(reader_error("json.safetensors", raw_file(R"({"a":{"dtype":"F32",)", "")),
                 Catch::Contains("json.safetensors") && Catch::Contains("not valid JSON"));
    REQUIRE_THAT(reader_error("json2.safetensors", raw_file("[1, 2]", "")), Catch::Contains("not an object"));
  }
  SECTION("offsets out of range") {
    REQUIRE_THAT(
        reader_error("range.safetensors", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8)),
        Catch::Contains("range.safetensors") && Catch::Contains("'a'") && Catch::Contains("run past"));
    REQUIRE_THAT(
        reader_error("rev.safetensors", raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8)),
        Catch::Contains("'a'"));
  }
  SECTION("overlapping tensors") {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    REQUIRE_THAT(reader_error("overlap.safetensors", raw_file(h, data8)),
                 Catch::Contains("overlap.safetensors") && Catch::Contains("'b'") && Catch::Contains("overlap"));
  }
  SECTION("gap and trailing bytes") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    REQUIRE_THAT(reader_error("gap.safetensors", raw_file(h, data8)), Catch::Contains("gap"));
    REQUIRE_THAT(reader_error("trail.safetensors", raw_file(good_header, data8 + "xxxx")),
                 Catch::Contains("trail.safetensors") && Catch::Contains("cover 8 bytes"));
  }
  SECTION("dtype x shape does not match the byte size") {
    const std::string h = R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})";
    REQUIRE_THAT(reader_error("size.safetensors", raw_file(h, data8)),
                 Catch::Contains("size.safetensors") && Catch::Contains("'w'") && Catch::Contains("needs 4 bytes"));
  }
  SECTION("unknown dtype, bad shape, bad metadata") {
    REQUIRE_THAT(reader_error("dt.safetensors",
                              raw_file(R"({"w":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data8)),
                 Catch::Contains("unknown dtype") && Catch::Contains("'w'"));
    REQUIRE_THAT(reader_error("shape.safetensors",
                              raw_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8)),
                 Catch::Contains("shape") && Catch::Contains("'w'"));
    REQUIRE_THAT(reader_error("meta.safetensors", raw_file(R"({"__metadata__":{"k":1}})", "")),
                 Catch::Contains("__metadata__"));
  }
}

TEST_CASE("a failed write leaves no file behind") {
  const std::string dir = test_tmpdir() + "/no_such_dir";
  REQUIRE_THROWS_AS(write_safetensors(dir + "/x.safetensors", sample_tensors()), InputError);
  REQUIRE_FALSE(std::filesystem::exists(dir));
}
