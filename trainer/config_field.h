// ConfigField: one key of the run config as the schema (config_schema.h) declares it — how its JSON
// value is read, what values it accepts, how it is printed — and the builders the schema uses.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/config.h"

namespace lattice {

// The field being read or checked and the config's source, for messages "{source}: {message}".
struct FieldContext {
  const std::string& source;
  std::string name;  // dotted: "model.hidden_size", or "device"
  [[noreturn]] void fail(const std::string& message) const;
};

struct ConfigField {
  std::string section;
  std::string key;  // empty: the section is itself the value (the top-level "device")
  bool text = false;  // string-valued: an unquoted --set value is the text itself, never JSON
  std::string doc;    // one line; the README's config reference says more
  // Reads the key's JSON value into the config: a wrong type or name is an error naming the field.
  std::function<void(const nlohmann::json& value, Config& config, const FieldContext& field)> read;
  // Checks the value once its section is read (ranges, and bounds set by other keys); may be empty.
  std::function<void(const Config& config, const FieldContext& field)> check;
  // The resolved value, as config_to_json prints it.
  std::function<nlohmann::json(const Config& config)> write;

  std::string name() const { return key.empty() ? section : section + "." + key; }
};

// A value for messages: "string \"768\"", "integer 3", "number 3.5", "boolean true", "null", "array [1,2]".
std::string describe_json(const nlohmann::json& value);

// The typed reads behind the builders; each error names the field and what it got.
int64_t read_int64(const nlohmann::json& value, const FieldContext& field);   // 1e4 is an integer too
uint64_t read_uint64(const nlohmann::json& value, const FieldContext& field);
double read_double(const nlohmann::json& value, const FieldContext& field);
bool read_bool(const nlohmann::json& value, const FieldContext& field);
std::string read_string(const nlohmann::json& value, const FieldContext& field);

// A rule on one value; it may read other keys (min_lr <= lr). Calls field.fail when broken.
template <typename T>
using Requirement = std::function<void(const T& value, const Config& config, const FieldContext& field)>;

Requirement<int64_t> at_least(int64_t min);
Requirement<int64_t> in_range(int64_t min, int64_t max);  // "must be >= min", then "must be <= max"
Requirement<double> positive();      // > 0 and finite
Requirement<double> non_negative();  // >= 0 and finite
Requirement<double> below_one();     // in [0, 1)

// Adds the fields of one section, in order, each bound to its member of S (the section's struct,
// Config::*section of the config; S = Config for a top-level value such as "device").
template <typename S>
class SectionFields {
 public:
  SectionFields(std::vector<ConfigField>& out, std::string section, S Config::*member = nullptr)
      : out_(out), section_(std::move(section)), member_(member) {}

  void integer(const char* key, int64_t S::*m, Requirement<int64_t> rule, const char* doc) {
    add(key, m, false, doc, read_int64, std::move(rule));
  }
  void unsigned_integer(const char* key, uint64_t S::*m, const char* doc) {
    add(key, m, false, doc, read_uint64, {});
  }
  void number(const char* key, double S::*m, Requirement<double> rule, const char* doc) {
    add(key, m, false, doc, read_double, std::move(rule));
  }
  void boolean(const char* key, bool S::*m, const char* doc) { add(key, m, false, doc, read_bool, {}); }
  void text(const char* key, std::string S::*m, Requirement<std::string> rule, const char* doc) {
    add(key, m, true, doc, read_string, std::move(rule));
  }
  // One of `values`, written as name(value): "must be one of a | b, got \"c\"" otherwise.
  template <typename E>
  void choice(const char* key, E S::*m, std::vector<E> values, const char* (*name)(E), const char* doc) {
    ConfigField f = field(key, true, doc);
    f.read = [this_section = member_, m, values, name](const nlohmann::json& j, Config& c, const FieldContext& ctx) {
      const std::string s = read_string(j, ctx);
      std::string list;
      for (E v : values) {
        if (s == name(v)) {
          at(c, this_section).*m = v;
          return;
        }
        list += std::string(list.empty() ? "" : " | ") + name(v);
      }
      ctx.fail(ctx.name + " must be one of " + list + ", got \"" + s + "\"");
    };
    f.write = [this_section = member_, m, name](const Config& c) {
      return nlohmann::json(name(at(c, this_section).*m));
    };
    out_.push_back(std::move(f));
  }
  // A field whose reading and printing are its own (lists, names parsed elsewhere).
  template <typename T>
  void custom(const char* key, T S::*m, bool text, const char* doc,
              std::function<T(const nlohmann::json&, const FieldContext&)> read,
              std::function<nlohmann::json(const T&)> write) {
    ConfigField f = field(key, text, doc);
    f.read = [this_section = member_, m, read](const nlohmann::json& j, Config& c, const FieldContext& ctx) {
      at(c, this_section).*m = read(j, ctx);
    };
    f.write = [this_section = member_, m, write](const Config& c) { return write(at(c, this_section).*m); };
    out_.push_back(std::move(f));
  }

 private:
  template <typename C>
  static auto& at(C& config, S Config::*member) {
    if constexpr (std::is_same_v<S, Config>) {
      return config;
    } else {
      return config.*member;
    }
  }

  ConfigField field(const char* key, bool text, const char* doc) const {
    ConfigField f;
    f.section = section_;
    f.key = key;
    f.text = text;
    f.doc = doc;
    return f;
  }

  template <typename T>
  void add(const char* key, T S::*m, bool text, const char* doc, T (*read)(const nlohmann::json&, const FieldContext&),
           Requirement<T> rule) {
    ConfigField f = field(key, text, doc);
    f.read = [this_section = member_, m, read](const nlohmann::json& j, Config& c, const FieldContext& ctx) {
      at(c, this_section).*m = read(j, ctx);
    };
    if (rule)
      f.check = [this_section = member_, m, rule](const Config& c, const FieldContext& ctx) {
        rule(at(c, this_section).*m, c, ctx);
      };
    f.write = [this_section = member_, m](const Config& c) { return nlohmann::json(at(c, this_section).*m); };
    out_.push_back(std::move(f));
  }

  std::vector<ConfigField>& out_;
  std::string section_;
  S Config::*member_;
};

}  // namespace lattice
