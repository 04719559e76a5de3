// IndexedDatasetWriter: buffered streaming writer with an atomic, fsynced commit in finish().
#include "data/indexed_dataset_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

namespace {

constexpr size_t kBufferBytes = 1 << 20;

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw Error(fmt::format("{}: write failed: {} (disk full?)", path, std::strerror(errno)));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void pread_all(int fd, void* data, size_t bytes, off_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(fmt::format("{}: read back failed: {}", path, n < 0 ? std::strerror(errno) : "EOF"));
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += n;
  }
}

int open_tmp(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InputError(fmt::format("{}: cannot create dataset file: {}; check --output-prefix", path,
                                 std::strerror(errno)));
  }
  return fd;
}

void fsync_or_throw(int fd, const std::string& path) {
  if (::fsync(fd) != 0) throw Error(fmt::format("{}: fsync failed: {}", path, std::strerror(errno)));
}

template <typename T>
void append_le(std::vector<unsigned char>& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM Linux are little-endian, as the format is
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDType dtype)
    : prefix_(std::move(prefix)),
      bin_tmp_(prefix_ + ".bin.tmp"),
      idx_tmp_(prefix_ + ".idx.tmp"),
      dtype_(dtype),
      item_size_(token_dtype_size(dtype)) {
  switch (dtype) {
    case TokenDType::kU8: max_token_ = 255; break;
    case TokenDType::kI8: max_token_ = 127; break;
    case TokenDType::kI16: max_token_ = 32767; break;
    case TokenDType::kU16: max_token_ = 65535; break;
    case TokenDType::kI32: case TokenDType::kI64: max_token_ = std::numeric_limits<int32_t>::max(); break;
    default:
      throw Error(fmt::format("IndexedDatasetWriter: token dtype {} cannot hold token ids",
                              token_dtype_name(dtype)));
  }
  bin_fd_ = open_tmp(bin_tmp_);
  try {
    idx_fd_ = open_tmp(idx_tmp_);
    unsigned char header[kIndexHeaderBytes] = {};  // filled in by finish()
    write_all(idx_fd_, header, sizeof(header), idx_tmp_);
  } catch (...) {
    abort();
    throw;
  }
  bin_buffer_.reserve(kBufferBytes);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_) abort();
}

void IndexedDatasetWriter::abort() noexcept {
  if (bin_fd_ >= 0) ::close(bin_fd_);
  if (idx_fd_ >= 0) ::close(idx_fd_);
  bin_fd_ = idx_fd_ = -1;
  if (!finished_) {
    ::unlink(bin_tmp_.c_str());
    ::unlink(idx_tmp_.c_str());
  }
  finished_ = true;  // unusable from here on
}

void IndexedDatasetWriter::flush_bin() {
  write_all(bin_fd_, bin_buffer_.data(), bin_buffer_.size(), bin_tmp_);
  bin_buffer_.clear();
  if (!length_buffer_.empty()) {
    write_all(idx_fd_, length_buffer_.data(), length_buffer_.size() * sizeof(int32_t), idx_tmp_);
    length_buffer_.clear();
  }
}

void IndexedDatasetWriter::add_tokens(std::span<const int32_t> tokens) {
  LATTICE_CHECK(!finished_, "IndexedDatasetWriter for {} used after finish()/abort()", prefix_);
  document_open_ = true;
  if (current_length_ + static_cast<int64_t>(tokens.size()) > std::numeric_limits<int32_t>::max()) {
    throw InputError(fmt::format(
        "{}: document {} has more than {} tokens, the limit of the .idx format; split the input into "
        "smaller documents (--text-document-separator)",
        prefix_, num_documents_, std::numeric_limits<int32_t>::max()));
  }
  const size_t old_size = bin_buffer_.size();
  bin_buffer_.resize(old_size + tokens.size() * item_size_);
  unsigned char* dst = bin_buffer_.data() + old_size;
  auto store = [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < tokens.size(); ++k) {
      int32_t t = tokens[k];
      if (t < 0 || t > max_token_) {
        bin_buffer_.resize(old_size);
        throw Error(fmt::format("{}: token id {} in document {} does not fit the dataset dtype {}",
                                prefix_, t, num_documents_, token_dtype_name(dtype_)));
      }
      largest_token_ = std::max<int64_t>(largest_token_, t);
      T v = static_cast<T>(t);
      std::memcpy(dst + k * sizeof(T), &v, sizeof(T));
    }
  };
  switch (dtype_) {
    case TokenDType::kU8: store(uint8_t{}); break;
    case TokenDType::kI8: store(int8_t{}); break;
    case TokenDType::kI16: store(int16_t{}); break;
    case TokenDType::kU16: store(uint16_t{}); break;
    case TokenDType::kI32: store(int32_t{}); break;
    case TokenDType::kI64: store(int64_t{}); break;
    default: break;
  }
  if (bin_buffer_.size() >= kBufferBytes) flush_bin();
  current_length_ += static_cast<int64_t>(tokens.size());
  num_tokens_ += static_cast<int64_t>(tokens.size());
  bin_pos_ += static_cast<int64_t>(tokens.size() * item_size_);
}

void IndexedDatasetWriter::end_document() {
  LATTICE_CHECK(!finished_, "IndexedDatasetWriter for {} used after finish()/abort()", prefix_);
  length_buffer_.push_back(static_cast<int32_t>(current_length_));
  current_length_ = 0;
  document_open_ = false;
  ++num_documents_;
  if (length_buffer_.size() >= (1 << 16)) flush_bin();
}

void IndexedDatasetWriter::finish(const std::function<void()>& before_commit) {
  LATTICE_CHECK(!finished_, "IndexedDatasetWriter for {} finished twice or after abort()", prefix_);
  try {
    if (document_open_) end_document();
    flush_bin();
    const uint64_t n = static_cast<uint64_t>(num_documents_);
    // Pointers: cumulative byte offsets, from the lengths already in the .idx temporary.
    std::vector<unsigned char> out;
    out.reserve(kBufferBytes + 16);
    std::vector<int32_t> lengths;
    int64_t pointer = 0;
    for (uint64_t i = 0; i < n; i += lengths.size()) {
      lengths.resize(std::min<uint64_t>(n - i, 1 << 16));
      pread_all(idx_fd_, lengths.data(), lengths.size() * 4, kIndexHeaderBytes + 4 * i, idx_tmp_);
      for (int32_t len : lengths) {
        append_le<int64_t>(out, pointer);
        pointer += static_cast<int64_t>(len) * static_cast<int64_t>(item_size_);
      }
      write_all(idx_fd_, out.data(), out.size(), idx_tmp_);
      out.clear();
    }
    LATTICE_CHECK(pointer == bin_pos_, "{}: lengths sum to {} bytes but {} were written", prefix_, pointer,
                  bin_pos_);
    for (uint64_t j = 0; j <= n; ++j) {
      append_le<int64_t>(out, static_cast<int64_t>(j));
      if (out.size() >= kBufferBytes) {
        write_all(idx_fd_, out.data(), out.size(), idx_tmp_);
        out.clear();
      }
    }
    write_all(idx_fd_, out.data(), out.size(), idx_tmp_);
    out.clear();
    out.insert(out.end(), kIndexMagic, kIndexMagic + sizeof(kIndexMagic));
    append_le<uint64_t>(out, kIndexVersion);
    append_le<uint8_t>(out, static_cast<uint8_t>(dtype_));
    append_le<uint64_t>(out, n);
    append_le<uint64_t>(out, n + 1);
    if (::pwrite(idx_fd_, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) {
      throw Error(fmt::format("{}: writing the header failed: {}", idx_tmp_, std::strerror(errno)));
    }
    fsync_or_throw(bin_fd_, bin_tmp_);
    fsync_or_throw(idx_fd_, idx_tmp_);
    ::close(bin_fd_);
    ::close(idx_fd_);
    bin_fd_ = idx_fd_ = -1;

    if (before_commit) before_commit();
    // Commit: no stale .idx may pair with the new .bin, and the .idx appears last.
    std::string idx = prefix_ + ".idx", bin = prefix_ + ".bin";
    if (::unlink(idx.c_str()) != 0 && errno != ENOENT) {
      throw Error(fmt::format("{}: cannot replace the old index: {}", idx, std::strerror(errno)));
    }
    if (std::rename(bin_tmp_.c_str(), bin.c_str()) != 0) {
      throw Error(fmt::format("{}: rename from {} failed: {}", bin, bin_tmp_, std::strerror(errno)));
    }
    if (std::rename(idx_tmp_.c_str(), idx.c_str()) != 0) {
      throw Error(fmt::format("{}: rename from {} failed: {}", idx, idx_tmp_, std::strerror(errno)));
    }
    std::filesystem::path dir = std::filesystem::absolute(prefix_).parent_path();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    finished_ = true;
  } catch (...) {
    abort();
    throw;
  }
}

}  // namespace lattice
