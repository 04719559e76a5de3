// DocumentReader: buffered line reading (memchr over 1 MiB blocks) and the text/JSONL document
// cutting rules; the UTF-8 validator.
#include "data/document_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

// Lines of one file, each with its '\n' (the last may lack one). A line longer than the block
// is assembled in long_line_, so memory is bounded by the block plus the longest line.
class DocumentReader::LineReader {
 public:
  LineReader(const std::string& path, std::atomic<int64_t>* bytes_read)
      : path_(path), bytes_read_(bytes_read), buf_(kBlock) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      throw InputError(fmt::format("{}: cannot read input file: {}; check --input", path, std::strerror(errno)));
    }
  }
  ~LineReader() {
    if (fd_ >= 0) ::close(fd_);
  }

  // The next line; false at end of file. The view is valid until the next call.
  bool next(std::string_view& line) {
    long_line_.clear();
    for (;;) {
      const char* base = buf_.data();
      if (const void* nl = std::memchr(base + begin_, '\n', end_ - begin_)) {
        size_t stop = static_cast<const char*>(nl) - base + 1;
        return take(line, stop);
      }
      if (eof_) {
        if (begin_ == end_ && long_line_.empty()) return false;
        return take(line, end_);
      }
      // No newline in the buffered bytes: keep them and read more.
      if (begin_ > 0) {
        std::memmove(buf_.data(), base + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      }
      if (end_ == buf_.size()) {  // a line longer than the block
        long_line_.append(buf_.data(), end_);
        end_ = 0;
      }
      fill();
    }
  }
  int64_t line_number() const { return line_number_; }
  int64_t line_offset() const { return line_offset_; }
  int64_t position() const { return position_; }

 private:
  static constexpr size_t kBlock = 1 << 20;

  bool take(std::string_view& line, size_t stop) {
    line_offset_ = position_;
    ++line_number_;
    if (long_line_.empty()) {
      line = std::string_view(buf_.data() + begin_, stop - begin_);
    } else {
      long_line_.append(buf_.data() + begin_, stop - begin_);
      line = long_line_;
    }
    position_ += static_cast<int64_t>(line.size());
    begin_ = stop;
    return true;
  }
  void fill() {
    for (;;) {
      ssize_t n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw InputError(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
      if (n == 0) eof_ = true;
      end_ += static_cast<size_t>(n);
      if (bytes_read_) bytes_read_->fetch_add(n, std::memory_order_relaxed);
      return;
    }
  }

  std::string path_;
  std::atomic<int64_t>* bytes_read_;
  int fd_ = -1;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::string long_line_;
  int64_t line_number_ = 0, line_offset_ = 0, position_ = 0;
};

DocumentReader::DocumentReader(std::vector<std::string> paths, std::vector<std::string> formats,
                               std::string separator, size_t split_bytes, std::atomic<int64_t>* bytes_read)
    : paths_(std::move(paths)),
      formats_(std::move(formats)),
      separator_(std::move(separator)),
      split_bytes_(split_bytes),
      bytes_read_(bytes_read) {}

DocumentReader::~DocumentReader() = default;

void DocumentReader::open_next_file() {
  ++file_;
  lines_.reset();
  doc_ = TextDoc{};
  if (file_ < static_cast<int32_t>(paths_.size())) lines_ = std::make_unique<LineReader>(paths_[file_], bytes_read_);
}

void DocumentReader::emit_text_piece(std::vector<DocumentPiece>& out, size_t& used, bool ends) {
  DocumentPiece p;
  p.file = file_;
  p.line = doc_.line;
  p.offset = doc_.offset;
  p.begins = !doc_.pieces_emitted;
  p.ends = ends;
  p.blank = ends && !doc_.nonblank;
  used += doc_.text.size() + sizeof(DocumentPiece);
  p.text = std::move(doc_.text);
  doc_.text = std::string();
  out.push_back(std::move(p));
  doc_.pieces_emitted = true;
}

// A separator (or the end of the file) ends the current segment; next_line/next_offset is where
// the next segment starts.
void DocumentReader::end_text_document(std::vector<DocumentPiece>& out, size_t& used, int64_t next_line,
                                       int64_t next_offset) {
  bool is_document = doc_.has_bytes || doc_.pieces_emitted;
  if (!is_document && separator_ == "percent-line" && !doc_.first_segment) is_document = true;  // "%\n%"
  if (is_document) emit_text_piece(out, used, /*ends=*/true);
  doc_ = TextDoc{};
  doc_.first_segment = false;
  doc_.line = next_line;
  doc_.offset = next_offset;
}

bool DocumentReader::next(std::vector<DocumentPiece>& out, size_t budget) {
  size_t used = 0;
  if (file_ < 0) open_next_file();
  while (lines_) {
    const bool jsonl = formats_[file_] == "jsonl";
    std::string_view line;
    while (used < budget) {
      if (!lines_->next(line)) {
        // End of file: the open text document ends; "file" mode makes one even of an empty file.
        if (!jsonl) {
          if (separator_ == "file" && !doc_.has_bytes && !doc_.pieces_emitted) {
            doc_.first_segment = false;
            doc_.line = 1;
            doc_.offset = 0;
            emit_text_piece(out, used, true);
          } else if (doc_.has_bytes || doc_.pieces_emitted) {
            emit_text_piece(out, used, true);
          }
        }
        open_next_file();
        break;
      }
      const int64_t lineno = lines_->line_number();
      const int64_t offset = lines_->line_offset();
      if (jsonl) {
        if (is_blank(line)) continue;  // blank lines between JSON objects are not documents
        DocumentPiece p;
        std::string_view body = line;
        if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
        p.text.assign(body);
        p.file = file_;
        p.line = lineno;
        p.offset = offset;
        p.jsonl = true;
        used += p.text.size() + sizeof(DocumentPiece);
        out.push_back(std::move(p));
        continue;
      }
      std::string_view body = line;
      if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
      if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
      if (separator_ == "percent-line" && body == "%") {
        end_text_document(out, used, lineno + 1, lines_->position());
        continue;
      }
      if (separator_ == "blank-line" && is_blank(body)) {
        if (doc_.has_bytes || doc_.pieces_emitted) end_text_document(out, used, lineno + 1, lines_->position());
        doc_.line = lineno + 1;
        doc_.offset = lines_->position();
        continue;
      }
      if (!doc_.has_bytes) {
        doc_.has_bytes = true;
        if (!doc_.pieces_emitted) {
          doc_.line = lineno;
          doc_.offset = offset;
        }
      }
      doc_.text.append(line);
      if (!doc_.nonblank && !is_blank(line)) doc_.nonblank = true;
      if (split_bytes_ > 0 && doc_.nonblank && doc_.text.size() >= split_bytes_) {
        emit_text_piece(out, used, /*ends=*/false);
        doc_.has_bytes = false;
        doc_.line = lineno + 1;
        doc_.offset = lines_->position();
      }
    }
    if (used >= budget) return true;
  }
  return false;
}


}  // namespace lattice
