// UTF-8 validation shared by `data prepare` (to name the bad byte's file and line) and the BPE
// tokenizers (which read text as Unicode).
#pragma once

#include <cstddef>
#include <string_view>

namespace lattice {

// Index of the first byte of s that is not part of well-formed UTF-8 (overlong forms, surrogates
// and code points above U+10FFFF are ill-formed), or npos if s is valid.
size_t find_invalid_utf8(std::string_view s);

}  // namespace lattice
