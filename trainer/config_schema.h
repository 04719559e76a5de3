// The config schema: every key of the run config declared once, in order (section, key, type,
// rule, doc). Parsing, --set typing, unknown-key hints and config_to_json all walk this table.
#pragma once

#include <string>
#include <vector>

#include "trainer/config_field.h"

namespace lattice {

// Every field, section by section in the order of config_sections(); within a section in the order
// of the messages that list its keys. A field's default is its member's value in Config{}, except
// where its doc says it is derived (the model's arch preset, num_kv_heads, ffn_hidden_size).
const std::vector<ConfigField>& config_schema();

// The top-level keys in order: "model", "training", ..., "checkpoint".
const std::vector<std::string>& config_sections();

// The keys of one section, in order; empty for a top-level value ("device").
const std::vector<std::string>& config_keys(const std::string& section);

// The field named "section.key" (or "device"); nullptr when there is none.
const ConfigField* find_config_field(const std::string& name);

}  // namespace lattice
