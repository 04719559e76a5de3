// The typed reads and the range rules of config fields. Every message names the dotted field and
// the value it got, and is prefixed with the config's source.
#include "trainer/config_field.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

using nlohmann::json;

void FieldContext::fail(const std::string& message) const { throw InputError(source + ": " + message); }

std::string describe_json(const json& j) {
  std::string text = j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  switch (j.type()) {
    case json::value_t::string: return "string " + text;
    case json::value_t::boolean: return "boolean " + text;
    case json::value_t::null: return "null";
    case json::value_t::array: return "array " + text;
    case json::value_t::object: return "object " + text;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer " + text;
    case json::value_t::number_float: return "number " + text;
    default: return text;
  }
}

int64_t read_int64(const json& j, const FieldContext& f) {
  // 1e20 is an integer too, just one that does not fit: say so instead of "not an integer".
  const auto too_large = [&] {
    const char* bound = j.get<double>() > 0 ? "below 2^63" : "at least -2^63";
    f.fail(fmt::format("{} must be an integer {}, got {}", f.name, bound, j.dump()));
  };
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) too_large();
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float() && std::isfinite(j.get<double>()) && std::floor(j.get<double>()) == j.get<double>()) {
    if (!(j.get<double>() >= -0x1p63 && j.get<double>() < 0x1p63)) too_large();
    return static_cast<int64_t>(j.get<double>());  // 1e4 is fine for an integer field
  }
  f.fail(fmt::format("{} must be an integer, got {}", f.name, describe_json(j)));
}

uint64_t read_uint64(const json& j, const FieldContext& f) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return static_cast<uint64_t>(j.get<int64_t>());
  if (j.is_number_float() && j.get<double>() >= 0 && std::isfinite(j.get<double>()) &&
      std::floor(j.get<double>()) == j.get<double>()) {
    if (!(j.get<double>() < 0x1p64)) f.fail(fmt::format("{} must be an integer below 2^64, got {}", f.name, j.dump()));
    return static_cast<uint64_t>(j.get<double>());
  }
  f.fail(fmt::format("{} must be a non-negative integer, got {}", f.name, describe_json(j)));
}

double read_double(const json& j, const FieldContext& f) {
  if (!j.is_number()) f.fail(fmt::format("{} must be a number, got {}", f.name, describe_json(j)));
  return j.get<double>();
}

bool read_bool(const json& j, const FieldContext& f) {
  if (!j.is_boolean()) f.fail(fmt::format("{} must be true or false, got {}", f.name, describe_json(j)));
  return j.get<bool>();
}

std::string read_string(const json& j, const FieldContext& f) {
  if (!j.is_string()) f.fail(fmt::format("{} must be a string, got {}", f.name, describe_json(j)));
  return j.get<std::string>();
}

Requirement<int64_t> at_least(int64_t min) {
  return [min](const int64_t& v, const Config&, const FieldContext& f) {
    if (v < min) f.fail(fmt::format("{} must be >= {}, got {}", f.name, min, v));
  };
}

Requirement<int64_t> in_range(int64_t min, int64_t max) {
  return [min, max](const int64_t& v, const Config& c, const FieldContext& f) {
    at_least(min)(v, c, f);
    if (v > max) f.fail(fmt::format("{} must be <= {}, got {}", f.name, max, v));
  };
}

Requirement<double> positive() {
  return [](const double& v, const Config&, const FieldContext& f) {
    if (!(v > 0) || !std::isfinite(v)) f.fail(fmt::format("{} must be > 0, got {}", f.name, v));
  };
}

Requirement<double> non_negative() {
  return [](const double& v, const Config&, const FieldContext& f) {
    if (!(v >= 0) || !std::isfinite(v)) f.fail(fmt::format("{} must be >= 0, got {}", f.name, v));
  };
}

Requirement<double> below_one() {
  return [](const double& v, const Config&, const FieldContext& f) {
    if (!(v >= 0 && v < 1)) f.fail(fmt::format("{} must be in [0, 1), got {}", f.name, v));
  };
}

}  // namespace lattice
