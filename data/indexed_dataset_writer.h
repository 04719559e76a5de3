// IndexedDatasetWriter: streams documents into a Megatron indexed dataset (PREFIX.bin + .idx).
// Writes PREFIX.bin.tmp / PREFIX.idx.tmp and renames them into place only in finish(), .idx last.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace lattice {

// Memory use is constant (a write buffer): sequence lengths go straight to the .idx temporary and
// the pointers are computed from them in finish(). One sequence per document, so the document
// index is 0, 1, ..., N. An interrupted run leaves only *.tmp files; a writer destroyed without a
// successful finish() (an exception) removes its temporaries. finish() fsyncs both files, removes
// a stale PREFIX.idx, renames .bin then .idx into place (the .idx is the commit point) and fsyncs
// the directory.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends tokens to the current document. Throws Error if a token does not fit the dtype.
  void add_tokens(std::span<const int32_t> tokens);
  // Ends the current document (possibly empty: it is recorded with length 0).
  void end_document();
  void add_document(std::span<const int32_t> tokens) {
    add_tokens(tokens);
    end_document();
  }
  // Ends an unfinished document, then commits the dataset. `before_commit`, when given, runs once the
  // new files are durable and just before they replace the old ones: a caller removes there what
  // describes the old dataset, so that a kill leaves the old files without it as briefly as possible.
  void finish(const std::function<void()>& before_commit = {});
  // Removes the temporaries; the writer is unusable afterwards. Called by the destructor.
  void abort() noexcept;

  int64_t num_documents() const { return num_documents_; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t bytes_written() const { return bin_pos_; }
  int64_t largest_token() const { return largest_token_; }  // -1 before the first token
  TokenDType dtype() const { return dtype_; }

 private:
  void flush_bin();

  std::string prefix_, bin_tmp_, idx_tmp_;
  TokenDType dtype_;
  size_t item_size_;
  int64_t max_token_;          // the largest id the dtype holds
  int64_t largest_token_ = -1;  // the largest id written
  int bin_fd_ = -1, idx_fd_ = -1;
  std::vector<unsigned char> bin_buffer_;
  std::vector<int32_t> length_buffer_;
  int64_t bin_pos_ = 0;          // bytes in .bin so far (buffered included)
  int64_t current_length_ = 0;   // tokens of the open document
  bool document_open_ = false;
  int64_t num_documents_ = 0;
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace lattice
