// IndexedDataset: mmap-backed reader of Megatron .idx/.bin files, validated at open.
#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

namespace {

constexpr const char* kRebuildHint = "re-run `lattice data prepare` to rebuild the dataset";

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // .idx arrays are not aligned (header is 34 bytes)
  return v;
}

// Maps a whole file read-only; returns nullptr for an empty file.
const unsigned char* map_file(const std::string& path, const char* what, uint64_t* size_out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw InputError(fmt::format(
        "{}: cannot open dataset {} file: {}. Check data.path (a dataset prefix P that has P.idx "
        "and P.bin) or create the dataset with `lattice data prepare`",
        path, what, std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: dataset {} file is not a regular file", path, what));
  }
  *size_out = static_cast<uint64_t>(st.st_size);
  if (st.st_size == 0) {
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    throw Error(fmt::format("{}: mmap of {} bytes failed: {}", path, st.st_size, std::strerror(err)));
  }
  return static_cast<const unsigned char*>(p);
}

}  // namespace

const char* token_dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kU8: return "u8";
    case TokenDType::kI8: return "i8";
    case TokenDType::kI16: return "i16";
    case TokenDType::kI32: return "i32";
    case TokenDType::kI64: return "i64";
    case TokenDType::kF64: return "f64";
    case TokenDType::kF32: return "f32";
    case TokenDType::kU16: return "u16";
  }
  return "?";
}

size_t token_dtype_size(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kU8: case TokenDType::kI8: return 1;
    case TokenDType::kI16: case TokenDType::kU16: return 2;
    case TokenDType::kI32: case TokenDType::kF32: return 4;
    case TokenDType::kI64: case TokenDType::kF64: return 8;
  }
  return 0;
}

TokenDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kU16 : TokenDType::kI32;
}

IndexedDataset::IndexedDataset(std::string prefix)
    : prefix_(std::move(prefix)), idx_path_(prefix_ + ".idx"), bin_path_(prefix_ + ".bin") {
  try {
    open_and_validate();
  } catch (...) {
    if (idx_ != nullptr) ::munmap(const_cast<unsigned char*>(idx_), idx_size_);
    if (bin_ != nullptr) ::munmap(const_cast<unsigned char*>(bin_), bin_size_);
    throw;
  }
}

IndexedDataset::~IndexedDataset() {
  if (idx_ != nullptr) ::munmap(const_cast<unsigned char*>(idx_), idx_size_);
  if (bin_ != nullptr) ::munmap(const_cast<unsigned char*>(bin_), bin_size_);
}

void IndexedDataset::open_and_validate() {
  idx_ = map_file(idx_path_, "index (.idx)", &idx_size_);
  const std::string& ip = idx_path_;
  if (idx_size_ < kIndexHeaderBytes) {
    throw InputError(fmt::format(
        "{}: truncated dataset index: {} bytes, shorter than the {}-byte header; {}", ip, idx_size_,
        kIndexHeaderBytes, kRebuildHint));
  }
  if (std::memcmp(idx_, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    throw InputError(fmt::format(
        "{}: not a Megatron indexed dataset index: bad magic at offset 0 (expected \"MMIDIDX\\0\\0\"); "
        "the file is corrupt or of another format; {}",
        ip, kRebuildHint));
  }
  uint64_t version = load<uint64_t>(idx_ + 9);
  if (version != kIndexVersion) {
    throw InputError(fmt::format(
        "{}: unsupported dataset index version {} at offset 9 (only version 1 is supported); {}", ip,
        version, kRebuildHint));
  }
  uint8_t code = idx_[17];
  switch (code) {
    case 1: case 2: case 3: case 4: case 5: case 8:
      dtype_ = static_cast<TokenDType>(code);
      break;
    case 6: case 7:
      throw InputError(fmt::format(
          "{}: dtype code {} ({}) at offset 17: floating-point datasets cannot hold token ids; "
          "tokenize the corpus with `lattice data prepare`",
          ip, code, token_dtype_name(static_cast<TokenDType>(code))));
    default:
      throw InputError(fmt::format(
          "{}: unknown dtype code {} at offset 17 (expected 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 8 u16); {}",
          ip, code, kRebuildHint));
  }
  item_size_ = token_dtype_size(dtype_);

  uint64_t n = load<uint64_t>(idx_ + 18);
  uint64_t d = load<uint64_t>(idx_ + 26);
  uint64_t body = idx_size_ - kIndexHeaderBytes;
  // Bound the counts by the file size before multiplying so nothing overflows.
  bool too_big = n > body / 12 || d > body / 8 || 12 * n + 8 * d > body;
  uint64_t expected = too_big ? 0 : kIndexHeaderBytes + 12 * n + 8 * d;
  if (too_big || idx_size_ < expected) {
    throw InputError(fmt::format(
        "{}: truncated dataset index: the header (offset 18, 26) declares {} sequences and {} "
        "document-index entries, which need {} bytes, but the file has {} bytes; {}",
        ip, n, d, too_big ? std::string("more than the file's") : std::to_string(expected), idx_size_,
        kRebuildHint));
  }
  if (idx_size_ > expected) {
    throw InputError(fmt::format(
        "{}: dataset index has {} trailing bytes after offset {} (the header declares {} sequences and "
        "{} document-index entries); {}",
        ip, idx_size_ - expected, expected, n, d, kRebuildHint));
  }
  if (d < 1) {
    throw InputError(fmt::format(
        "{}: document index is empty (offset 26 says 0 entries; it needs at least the entry 0); {}", ip,
        kRebuildHint));
  }
  num_sequences_ = static_cast<int64_t>(n);
  num_doc_index_ = static_cast<int64_t>(d);
  lengths_ = idx_ + kIndexHeaderBytes;
  pointers_ = lengths_ + 4 * n;
  doc_index_ = pointers_ + 8 * n;

  bin_ = map_file(bin_path_, "token (.bin)", &bin_size_);

  int64_t total = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    int32_t len = load<int32_t>(lengths_ + 4 * i);
    int64_t ptr = load<int64_t>(pointers_ + 8 * i);
    if (len < 0) {
      throw InputError(fmt::format("{}: sequence {} has negative length {} (entry at offset {}); {}", ip,
                                   i, len, kIndexHeaderBytes + 4 * i, kRebuildHint));
    }
    uint64_t bytes = static_cast<uint64_t>(len) * item_size_;
    if (ptr < 0 || static_cast<uint64_t>(ptr) > bin_size_ || bytes > bin_size_ - static_cast<uint64_t>(ptr)) {
      throw InputError(fmt::format(
          "{}: sequence {} (pointer entry at offset {}) spans bytes [{}, {}) but {} has only {} bytes; "
          "the .bin and .idx do not belong together or one is truncated; {}",
          ip, i, kIndexHeaderBytes + 4 * n + 8 * i, ptr, static_cast<int64_t>(ptr + bytes), bin_path_,
          bin_size_, kRebuildHint));
    }
    total += len;
  }
  total_tokens_ = total;

  int64_t prev = 0;
  for (int64_t j = 0; j < num_doc_index_; ++j) {
    int64_t v = load<int64_t>(doc_index_ + 8 * j);
    uint64_t off = kIndexHeaderBytes + 12 * n + 8 * j;
    if (j == 0 && v != 0) {
      throw InputError(fmt::format("{}: document index entry 0 (offset {}) is {}, must be 0; {}", ip, off,
                                   v, kRebuildHint));
    }
    if (v < prev || v > num_sequences_) {
      throw InputError(fmt::format(
          "{}: document index entry {} (offset {}) is {}: entries must be non-decreasing and within "
          "[0, {}]; {}",
          ip, j, off, v, num_sequences_, kRebuildHint));
    }
    prev = v;
  }
  if (prev != num_sequences_) {
    throw InputError(fmt::format(
        "{}: document index ends at {} (entry {}), must end at the sequence count {}; {}", ip, prev,
        num_doc_index_ - 1, num_sequences_, kRebuildHint));
  }
}

int64_t IndexedDataset::sequence_length(int64_t i) const {
  LATTICE_CHECK(i >= 0 && i < num_sequences_, "sequence {} out of range [0, {}) in {}", i,
                num_sequences_, idx_path_);
  return load<int32_t>(lengths_ + 4 * i);
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  LATTICE_CHECK(i >= 0 && i < num_sequences_, "sequence {} out of range [0, {}) in {}", i,
                num_sequences_, idx_path_);
  return load<int64_t>(pointers_ + 8 * i);
}

int64_t IndexedDataset::document_index(int64_t j) const {
  LATTICE_CHECK(j >= 0 && j < num_doc_index_, "document-index entry {} out of range [0, {}) in {}", j,
                num_doc_index_, idx_path_);
  return load<int64_t>(doc_index_ + 8 * j);
}

namespace {

template <typename T>
void convert(const unsigned char* src, int64_t count, int32_t* out, int64_t* bad_pos, int64_t* bad_value) {
  for (int64_t k = 0; k < count; ++k) {
    T v = load<T>(src + k * sizeof(T));
    if constexpr (std::is_signed_v<T> || sizeof(T) >= 4) {
      if (static_cast<int64_t>(v) < 0 || static_cast<int64_t>(v) > std::numeric_limits<int32_t>::max()) {
        *bad_pos = k;
        *bad_value = static_cast<int64_t>(v);
        return;
      }
    }
    out[k] = static_cast<int32_t>(v);
  }
}

}  // namespace

void IndexedDataset::read(int64_t i, int64_t offset, int64_t count, int32_t* out) const {
  int64_t len = sequence_length(i);
  LATTICE_CHECK(offset >= 0 && count >= 0 && offset + count <= len,
                "tokens [{}, {}) outside sequence {} of length {} in {}", offset, offset + count, i, len,
                bin_path_);
  if (count == 0) return;
  const unsigned char* src = bin_ + sequence_pointer(i) + offset * static_cast<int64_t>(item_size_);
  int64_t bad_pos = -1, bad_value = 0;
  switch (dtype_) {
    case TokenDType::kU8: convert<uint8_t>(src, count, out, &bad_pos, &bad_value); break;
    case TokenDType::kI8: convert<int8_t>(src, count, out, &bad_pos, &bad_value); break;
    case TokenDType::kI16: convert<int16_t>(src, count, out, &bad_pos, &bad_value); break;
    case TokenDType::kU16: convert<uint16_t>(src, count, out, &bad_pos, &bad_value); break;
    case TokenDType::kI32: convert<int32_t>(src, count, out, &bad_pos, &bad_value); break;
    case TokenDType::kI64: convert<int64_t>(src, count, out, &bad_pos, &bad_value); break;
    default: LATTICE_CHECK(false, "unreachable dtype {}", token_dtype_name(dtype_));
  }
  if (bad_pos >= 0) {
    throw InputError(fmt::format(
        "{}: token {} of sequence {} (byte {}) is {}: token ids must lie in [0, {}]; the dataset was "
        "not written by a tokenizer; {}",
        bin_path_, offset + bad_pos, i, sequence_pointer(i) + (offset + bad_pos) * int64_t(item_size_),
        bad_value, std::numeric_limits<int32_t>::max(), kRebuildHint));
  }
}

}  // namespace lattice
