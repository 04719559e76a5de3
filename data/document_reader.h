// DocumentReader: the reader stage of `lattice data prepare`. It streams text / JSONL files and
// cuts them into documents (or line-aligned pieces of long ones) that carry file, line and offset.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lattice {

// One unit of work for an encoder. JSONL: one non-blank line (the JSON text, without '\n').
// Text: a whole document, or — when the tokenizer may split text anywhere and the document is
// long — a line-aligned piece of it; the writer ends the document after the piece with `ends`.
struct DocumentPiece {
  std::string text;
  int32_t file = 0;        // index into the reader's paths
  int64_t line = 0;        // 1-based line of the file where the piece (document) starts
  int64_t offset = 0;      // byte offset in the file where it starts
  bool jsonl = false;
  bool begins = true;      // first piece of its document
  bool ends = true;        // last piece of its document
  bool blank = false;      // text only, on the last piece: the whole document is empty/whitespace
};

// Text separators: "file" (a file is one document), "blank-line" (runs of blank lines separate
// documents; leading/trailing blank lines make none), "percent-line" (lines that are exactly "%";
// text before the first and after the last separator is a document only if it has any bytes, so
// fortune files' final "%" makes no empty document, but "%\n%" does).
class DocumentReader {
 public:
  // formats[i] is "text" or "jsonl" for paths[i]. split_bytes > 0: text documents longer than that
  // are handed out in line-aligned pieces (only valid for tokenizers that split anywhere).
  // bytes_read (may be null) is advanced as input is read, for progress reporting.
  DocumentReader(std::vector<std::string> paths, std::vector<std::string> formats, std::string separator,
                 size_t split_bytes, std::atomic<int64_t>* bytes_read);
  ~DocumentReader();

  // Appends pieces to `out` until their text reaches `budget` bytes or the input ends. Returns
  // false once all input has been read (out may have received the last pieces). Throws
  // InputError for unreadable files.
  bool next(std::vector<DocumentPiece>& out, size_t budget);

  const std::string& path(int32_t file) const { return paths_[file]; }

 private:
  class LineReader;
  struct TextDoc {
    std::string text;
    int64_t line = 1, offset = 0;          // where the current document (or segment) starts
    bool has_bytes = false, nonblank = false, pieces_emitted = false, first_segment = true;
  };
  void open_next_file();
  void emit_text_piece(std::vector<DocumentPiece>& out, size_t& used, bool ends);
  void end_text_document(std::vector<DocumentPiece>& out, size_t& used, int64_t next_line, int64_t next_offset);

  std::vector<std::string> paths_, formats_;
  std::string separator_;
  size_t split_bytes_;
  std::atomic<int64_t>* bytes_read_;
  int32_t file_ = -1;
  std::unique_ptr<LineReader> lines_;
  TextDoc doc_;
};

// True if s is empty or only ASCII whitespace.
inline bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

}  // namespace lattice
