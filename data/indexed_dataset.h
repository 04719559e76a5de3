// IndexedDataset: read-only, mmap-backed reader of a Megatron indexed dataset (PREFIX.idx + .bin).
// Everything is validated at open; every byte offset is 64-bit so .bin files over 4 GiB work.
//
// The .idx format (little-endian), as Megatron-LM's MMapIndexedDataset writes it:
//   offset 0   char[9]  magic "MMIDIDX\0\0"
//   offset 9   u64      version, must be 1
//   offset 17  u8       dtype code: 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16
//   offset 18  u64      N, number of sequences
//   offset 26  u64      D, number of document-index entries
//   offset 34  i32[N]   sequence lengths in tokens
//              i64[N]   byte offset of each sequence in .bin
//              i64[D]   document index: 0 = d[0] <= d[1] <= ... <= d[D-1] = N
// The .bin file is the raw tokens. Lattice writes one sequence per document; readers treat each
// sequence as one document (as Megatron's GPTDataset does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lattice {

// Token storage types of the .bin file, with their Megatron dtype codes.
enum class TokenDType : uint8_t {
  kU8 = 1,
  kI8 = 2,
  kI16 = 3,
  kI32 = 4,
  kI64 = 5,
  kF64 = 6,
  kF32 = 7,
  kU16 = 8,
};

const char* token_dtype_name(TokenDType dtype);
size_t token_dtype_size(TokenDType dtype);
// The dtype Lattice writes for a vocabulary: u16 when vocab_size < 65500, else i32.
TokenDType token_dtype_for_vocab(int64_t vocab_size);

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderBytes = 34;

class IndexedDataset {
 public:
  // Opens and validates PREFIX.idx and PREFIX.bin. Throws InputError naming the file, the
  // offending offset or entry, and what to do.
  explicit IndexedDataset(std::string prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  const std::string& idx_path() const { return idx_path_; }
  const std::string& bin_path() const { return bin_path_; }
  TokenDType dtype() const { return dtype_; }
  uint64_t bin_bytes() const { return bin_size_; }

  int64_t num_sequences() const { return num_sequences_; }
  // Sequences are documents here (one sequence per document).
  int64_t num_documents() const { return num_sequences_; }
  int64_t num_document_index_entries() const { return num_doc_index_; }
  int64_t sequence_length(int64_t i) const;   // tokens
  int64_t sequence_pointer(int64_t i) const;  // byte offset in .bin
  int64_t document_index(int64_t j) const;    // entry j of the document index
  int64_t total_tokens() const { return total_tokens_; }

  // Copies tokens [offset, offset + count) of sequence i into out as int32. Throws InputError if a
  // token is negative or above INT32_MAX (naming the file, sequence and position), Error if the
  // range is outside the sequence.
  void read(int64_t i, int64_t offset, int64_t count, int32_t* out) const;

 private:
  void open_and_validate();

  std::string prefix_, idx_path_, bin_path_;
  TokenDType dtype_ = TokenDType::kU16;
  size_t item_size_ = 2;
  int64_t num_sequences_ = 0;
  int64_t num_doc_index_ = 0;
  int64_t total_tokens_ = 0;
  const unsigned char* idx_ = nullptr;
  uint64_t idx_size_ = 0;
  const unsigned char* bin_ = nullptr;
  uint64_t bin_size_ = 0;
  const unsigned char* lengths_ = nullptr;   // i32[N] inside idx_
  const unsigned char* pointers_ = nullptr;  // i64[N]
  const unsigned char* doc_index_ = nullptr; // i64[D]
};

}  // namespace lattice
