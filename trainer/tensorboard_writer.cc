// TensorBoard event files (see tensorboard_writer.h): Event messages in TFRecord framing.
#include "trainer/tensorboard_writer.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "kernels/error.h"
#include "trainer/tensorboard_event.pb.h"
#include "trainer/tf_record.h"

namespace lattice {

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int64_t first_step, int64_t flush_interval)
    : flush_interval_(flush_interval) {
  if (dir.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const double now = unix_seconds();
  // TensorFlow's name; a second run within the same second adds a counter. TensorBoard reads the
  // files in name order, so the time (10 digits) and the counter keep the runs in order.
  const std::string base =
      fmt::format("{}/events.out.tfevents.{:010d}.{}", dir, static_cast<int64_t>(now), hostname());
  path_ = base;
  for (int n = 1; fs::exists(path_, ec); ++n) path_ = fmt::format("{}.{}", base, n);
  file_.open(path_, std::ios::binary);
  if (!file_)
    throw InputError(fmt::format("logging.tensorboard_dir: cannot create '{}'; check the directory is writable", path_));

  tensorboard::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
  tensorboard::Event start;
  start.set_wall_time(now);
  start.set_step(first_step);
  start.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  write_record(start.SerializeAsString());
  flush();
}

void TensorBoardWriter::write_step(const StepMetrics& m) {
  Scalars s = {{"train/loss", m.loss},
               {"train/grad_norm", m.grad_norm},
               {"train/lr", m.lr},
               {"train/tokens_per_s", m.tokens_per_s},
               {"train/step_ms", m.step_ms},
               {"train/gflops", m.gflops},
               {"train/data_wait_ms", m.data_wait_ms}};
  if (m.bubble >= 0) s.emplace_back("train/bubble", m.bubble);
  if (m.dp_comm_hidden >= 0) s.emplace_back("train/dp_comm_hidden", m.dp_comm_hidden);
  write_scalars(m.step, s);
  if (m.step % flush_interval_ == 0) flush();  // TensorBoard shows a live run
}

void TensorBoardWriter::write_validation(int64_t step, double val_loss) {
  write_scalars(step, {{"val/loss", val_loss}});
  flush();
}

void TensorBoardWriter::write_summary(const RunSummary& s, int64_t step) {
  Scalars scalars = {{"summary/wall_s", s.wall_s}};
  auto put = [&](std::string_view tag, double v) {
    if (v >= 0) scalars.emplace_back(tag, v);
  };
  put("summary/tokens_per_s", s.tokens_per_s);
  put("summary/gflops", s.gflops);
  put("summary/mfu", s.mfu);
  put("summary/bubble_measured", s.bubble_measured);
  put("summary/bubble_theory", s.bubble_theory);
  put("summary/dp_comm_hidden", s.dp_comm_hidden);
  put("summary/peak_host_bytes", s.peak_host_bytes);
  put("summary/peak_device_bytes", s.peak_device_bytes);
  write_scalars(step, scalars);
  flush();
}

void TensorBoardWriter::write_scalars(int64_t step, const Scalars& scalars) {
  if (path_.empty()) return;
  tensorboard::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(std::string(tag));
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& event) {
  file_ << tf_record(event);
  if (!file_) throw Error(fmt::format("writing TensorBoard events to '{}' failed (disk full?)", path_));
}

void TensorBoardWriter::flush() {
  if (path_.empty()) return;
  file_.flush();
  if (!file_) throw Error(fmt::format("writing TensorBoard events to '{}' failed (disk full?)", path_));
}

}  // namespace lattice
