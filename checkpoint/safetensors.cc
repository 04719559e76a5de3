// safetensors: validation-first reader (mmap) and atomic writer.
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace lattice {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("safetensors file '{}': {}", path, what));
}

[[noreturn]] void bad_tensor(const std::string& path, const std::string& name, const std::string& what) {
  throw InputError(fmt::format("safetensors file '{}': tensor '{}': {}", path, name, what));
}

// Writes a file next to its final path and renames it into place only when complete.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(fmt::format("cannot create '{}': {}", tmp_, errno_text()));
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, std::min<size_t>(bytes, size_t{1} << 30));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error(fmt::format("writing '{}' failed: {}", tmp_, errno_text()));
      }
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) throw Error(fmt::format("fsync of '{}' failed: {}", tmp_, errno_text()));
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(fmt::format("closing '{}' failed: {}", tmp_, errno_text()));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error(fmt::format("renaming '{}' to '{}' failed: {}", tmp_, path_, errno_text()));
    committed_ = true;
    // Make the rename itself durable.
    const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    const std::string dir = parent.empty() ? std::string(".") : parent.string();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

const char* safetensors_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kI32: return "I32";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
  }
  return "?";
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"U16", 2}, {"I16", 2},
      {"F16", 2},  {"BF16", 2}, {"U32", 4}, {"I32", 4},     {"F32", 4},     {"U64", 8}, {"I64", 8},
      {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad_file(path, fmt::format("cannot open: {}", errno_text()));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    bad_file(path, fmt::format("cannot stat: {}", errno_text()));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    bad_file(path, "not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    bad_file(path, fmt::format("file is {} bytes, shorter than the 8-byte header length (truncated?)", file_size));
  }
  map_ = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    bad_file(path, fmt::format("cannot mmap: {}", errno_text()));
  }
  map_bytes_ = file_size;

  // From here on, a throw must unmap: the destructor does not run for a throwing constructor.
  try {
    const uint8_t* base = static_cast<const uint8_t*>(map_);
    uint64_t header_len = 0;
    std::memcpy(&header_len, base, 8);
    if (header_len > kMaxHeaderBytes)
      bad_file(path, fmt::format("header length {} is above the format's limit of {} bytes (not a safetensors "
                                 "file, or corrupt)",
                                 header_len, kMaxHeaderBytes));
    if (header_len > file_size - 8)
      bad_file(path, fmt::format("header length {} runs past the end of the {}-byte file (truncated?)", header_len,
                                 file_size));
    data_start_ = 8 + header_len;
    const uint64_t buffer_size = file_size - data_start_;

    nlohmann::json header;
    try {
      header = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8),
                                     reinterpret_cast<const char*>(base + 8 + header_len));
    } catch (const nlohmann::json::exception& e) {
      bad_file(path, fmt::format("header is not valid JSON: {}", e.what()));
    }
    if (!header.is_object()) bad_file(path, "header JSON is not an object");

    std::vector<const SafetensorsEntry*> order;
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const nlohmann::json& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) bad_file(path, "\"__metadata__\" is not an object of strings");
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m.value().is_string())
            bad_file(path, fmt::format("\"__metadata__\" value of '{}' is not a string", m.key()));
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      if (!v.is_object()) bad_tensor(path, name, "header entry is not an object");
      SafetensorsEntry e;
      e.name = name;
      auto dt = v.find("dtype");
      if (dt == v.end() || !dt->is_string()) bad_tensor(path, name, "missing or non-string \"dtype\"");
      e.dtype = dt->get<std::string>();
      const size_t esize = safetensors_dtype_size(e.dtype);
      if (esize == 0) bad_tensor(path, name, fmt::format("unknown dtype \"{}\"", e.dtype));
      auto sh = v.find("shape");
      if (sh == v.end() || !sh->is_array()) bad_tensor(path, name, "missing or non-array \"shape\"");
      uint64_t numel = 1;
      for (const auto& d : *sh) {
        if (!d.is_number_unsigned())
          bad_tensor(path, name, fmt::format("shape {} is not a list of non-negative integers", sh->dump()));
        const uint64_t n = d.get<uint64_t>();
        if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, n, &numel))
          bad_tensor(path, name, fmt::format("shape {} overflows", sh->dump()));
        e.shape.push_back(static_cast<int64_t>(n));
      }
      auto off = v.find("data_offsets");
      if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
          !(*off)[1].is_number_unsigned())
        bad_tensor(path, name, "\"data_offsets\" must be [begin, end] with non-negative integers");
      e.begin = (*off)[0].get<uint64_t>();
      e.end = (*off)[1].get<uint64_t>();
      for (auto k = v.begin(); k != v.end(); ++k)
        if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
          bad_tensor(path, name, fmt::format("unknown header field \"{}\"", k.key()));
      if (e.begin > e.end)
        bad_tensor(path, name, fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
      if (e.end > buffer_size)
        bad_tensor(path, name,
                   fmt::format("data_offsets [{}, {}] run past the {}-byte data buffer (truncated file?)", e.begin,
                               e.end, buffer_size));
      uint64_t expected = 0;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(esize), &expected) || expected != e.end - e.begin)
        bad_tensor(path, name,
                   fmt::format("{} {} needs {} bytes but data_offsets [{}, {}] hold {}", e.dtype,
                               shape_string(e.shape), numel * esize, e.begin, e.end, e.end - e.begin));
      auto [pos, inserted] = entries_.emplace(name, std::move(e));
      if (!inserted) bad_tensor(path, name, "appears twice in the header");
      order.push_back(&pos->second);
    }

    // Tensors must tile the buffer: sorted by offset, each begins where the previous ended.
    std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t cursor = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const SafetensorsEntry* e : order) {
      if (e->begin < cursor)
        bad_tensor(path, e->name,
                   fmt::format("data_offsets [{}, {}] overlap tensor '{}' (which ends at {})", e->begin, e->end,
                               prev->name, cursor));
      if (e->begin > cursor)
        bad_tensor(path, e->name,
                   fmt::format("data_offsets [{}, {}] leave a gap after byte {} of the data buffer", e->begin, e->end,
                               cursor));
      cursor = e->end;
      prev = e;
    }
    if (cursor != buffer_size)
      bad_file(path, fmt::format("tensors cover {} bytes but the data buffer holds {} (trailing bytes or a "
                                 "corrupt header)",
                                 cursor, buffer_size));
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) bad_tensor(path_, name, "no such tensor in the file");
  return it->second;
}

const uint8_t* SafetensorsFile::data(const SafetensorsEntry& e) const {
  return static_cast<const uint8_t*>(map_) + data_start_ + e.begin;
}

Tensor SafetensorsFile::read_f32(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  Tensor t = Tensor::empty(e.shape, DType::kF32);
  float* out = t.f32();
  const uint8_t* src = data(e);
  const int64_t n = t.numel();
  if (e.dtype == "F32") {
    if (n > 0) std::memcpy(out, src, static_cast<size_t>(n) * 4);
  } else if (e.dtype == "F16" || e.dtype == "BF16") {
    const bool half = e.dtype == "F16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = half ? half_to_float(v) : bfloat16_to_float(v);
    }
  } else {
    bad_tensor(path_, name, fmt::format("dtype {} cannot be read as floats (F32, F16 and BF16 can)", e.dtype));
  }
  release(src, e.end - e.begin);
  return t;
}

Tensor SafetensorsFile::read_i32(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype != "I32") bad_tensor(path_, name, fmt::format("dtype is {}, expected I32", e.dtype));
  return read(name);
}

Tensor SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  DType dtype;
  if (e.dtype == "F32") {
    dtype = DType::kF32;
  } else if (e.dtype == "BF16") {
    dtype = DType::kBF16;
  } else if (e.dtype == "I32") {
    dtype = DType::kI32;
  } else {
    return read_f32(name);  // F16 widens; other dtypes are read_f32's InputError
  }
  Tensor t = Tensor::empty(e.shape, dtype);
  if (t.numel() > 0) std::memcpy(t.raw(), data(e), t.bytes());
  release(data(e), e.end - e.begin);
  return t;
}

void SafetensorsFile::release(const void* data, size_t bytes) const {
  if (map_ == nullptr || bytes == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t begin = std::max(base, reinterpret_cast<uintptr_t>(data) / page * page);
  const uintptr_t end = std::min(base + map_bytes_, (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page);
  // Read-only, never written: the pages are the file's, so dropping them loses nothing.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata, const WriteObserver& observer) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name
    if (name == "__metadata__") throw InputError(fmt::format("'{}': a tensor may not be named __metadata__", path));
    LATTICE_CHECK(t.defined(), "tensor '{}' written to '{}' is undefined", name, path);
    LATTICE_CHECK(t.device() == Device::kCpu, "tensor '{}' written to '{}' must be on the host, is {}", name,
                  path, t.describe());
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = safetensors_dtype_of(t.dtype());
    e["shape"] = t.shape();
    e["data_offsets"] = {offset, offset + t.bytes()};
    header[name] = std::move(e);
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  AtomicFile file(path);
  auto put = [&](const std::string& tensor, const void* data, size_t bytes) {
    file.write(data, bytes);
    if (observer) observer(tensor, data, bytes);
  };
  put("", &header_len, 8);
  put("", text.data(), text.size());
  for (const auto& [name, t] : tensors)
    if (t.bytes() > 0) put(name, t.raw(), t.bytes());
  file.commit();
}

std::map<std::string, Tensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (const std::string& name : file.names()) out.emplace(name, file.read(name));
  if (metadata != nullptr) *metadata = file.metadata();
  return out;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicFile file(path);
  file.write(contents.data(), contents.size());
  file.commit();
}

}  // namespace lattice
