// The checkpoint benchmark behind format_checkpoint_bench's figures.
#include "checkpoint/checkpoint_bench.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "model/model_parameters.h"

namespace lattice {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

nlohmann::json model_section(const ModelConfig& c) {
  return {{"model",
           {{"arch", arch_name(c.arch)},
            {"num_layers", c.num_layers},
            {"hidden_size", c.hidden_size},
            {"num_attention_heads", c.num_attention_heads},
            {"ffn_hidden_size", c.ffn_hidden_size},
            {"vocab_size", c.vocab_size},
            {"seq_length", c.seq_length}}}};
}

// The benchmark's own directory: it must be new or empty when the benchmark starts (so that it never
// deletes a checkpoint it did not write), and at the end (or on an error) loses exactly what the
// benchmark wrote — `latest` and the iteration directories of its steps — and, when the benchmark
// created it, the directory itself.
class ScratchDir {
 public:
  ScratchDir(std::string dir, int64_t last_step) : dir_(std::move(dir)), last_step_(last_step) {
    std::error_code ec;
    if (fs::exists(dir_, ec)) {
      if (!fs::is_directory(dir_, ec) || !fs::is_empty(dir_, ec))
        throw InputError(fmt::format("the checkpoint benchmark writes and deletes its own checkpoints in '{}', which "
                                     "is not an empty directory: give it a new or empty directory (nothing was "
                                     "changed; to read a checkpoint use lattice export --checkpoint)",
                                     dir_));
    } else {
      make_directories(dir_);
      created_ = true;
    }
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove(fs::path(dir_) / kLatestFile, ec);
    for (int64_t step = 1; step <= last_step_; ++step)
      for (const char* suffix : {"", kPartialSuffix, kDeletingSuffix})
        fs::remove_all(fs::path(dir_) / (iter_dir_name(step) + suffix), ec);
    if (created_) fs::remove(dir_, ec);  // only when empty: removes nothing it did not write
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

 private:
  std::string dir_;
  int64_t last_step_;
  bool created_ = false;
};

}  // namespace

ModelConfig gpt2_124m_config() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.num_layers = 12;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.num_kv_heads = 12;
  c.ffn_hidden_size = 3072;
  c.vocab_size = 50257;
  c.seq_length = 1024;
  return c;
}

CheckpointBenchResult bench_checkpoint(const ModelConfig& model, const std::string& dir, int async_saves, double step_s) {
  LATTICE_CHECK(async_saves >= 2, "async_saves = {} (the first warms up; at least one more is measured)", async_saves);
  // Steps saved: 1 (synchronous), then 2 .. 1 + async_saves (blocking) and on (overlapped).
  const ScratchDir scratch(dir, /*last_step=*/1 + 2 * async_saves);
  const nlohmann::json config = model_section(model);
  ParameterStore store(model_parameter_specs(model), host_context());
  store.initialize(1234);
  Tensor exp_avg = Tensor::empty({store.numel()});
  Tensor exp_avg_sq = Tensor::empty({store.numel()});
  ops::fill(exp_avg, 1e-3f);
  ops::fill(exp_avg_sq, 1e-6f);
  CheckpointState state;
  state.seed = 1234;

  CheckpointBenchResult r;
  r.parameters = store.numel();
  r.async_saves = async_saves;
  r.step_s = step_s;
  {
    CheckpointWriter sync({dir, /*async=*/false, /*keep_last=*/1, 1}, {}, config, CheckpointLayout{});
    state.step = 1;
    const auto t0 = std::chrono::steady_clock::now();
    sync.save(store, {&store.flat_values(), &exp_avg, &exp_avg_sq}, state);
    r.sync_save_s = seconds_since(t0);
    r.bytes = sync.last_timings().bytes;
  }
  auto run_async = [&](bool overlap, int64_t first_step) {
    AsyncSaveFigures f;
    CheckpointWriterOptions options{dir, /*async=*/true, /*keep_last=*/1, 1};
    options.overlap_snapshot = overlap;
    CheckpointWriter writer(options, {}, config, CheckpointLayout{});
    writer.reserve(store, /*optimizer_state=*/true);  // as the trainer does at start-up
    for (int i = 0; i < async_saves; ++i) {
      state.step = first_step + i;
      writer.save(store, {&store.flat_values(), &exp_avg, &exp_avg_sq}, state);
      while (true) {  // training steps until the save is committed
        std::this_thread::sleep_for(std::chrono::duration<double>(step_s));  // forward + backward
        writer.wait_snapshot();
        ops::fill(exp_avg, 1e-3f * static_cast<float>(i + 2));  // the optimizer step changes state
        if (writer.try_commit()) break;
      }
      const SaveTimings& t = writer.last_timings();
      if (i == 0) {
        f.first_stall_s = t.stall_s();
        continue;
      }
      f.stall_s += t.stall_s();
      f.snapshot_s += t.snapshot_s;
      f.fence_s += t.fence_s;
      f.commit_s += t.commit_s;
      f.total_s += t.total_s;
    }
    writer.finish();
    const double n = async_saves - 1;
    f.stall_s /= n;
    f.snapshot_s /= n;
    f.fence_s /= n;
    f.commit_s /= n;
    f.total_s /= n;
    return f;
  };
  r.blocking = run_async(false, 2);
  r.overlapped = run_async(true, 2 + async_saves);
  {
    ParameterStore back(model_parameter_specs(model), host_context());
    Tensor m = Tensor::empty({back.numel()});
    Tensor v = Tensor::empty({back.numel()});
    const auto t0 = std::chrono::steady_clock::now();
    load_checkpoint(resolve_checkpoint(dir), config, {&back, &back.flat_values(), &m, &v});
    r.load_s = seconds_since(t0);
  }
  return r;
}

std::string format_checkpoint_bench(const CheckpointBenchResult& r) {
  auto line = [&](const char* what, const AsyncSaveFigures& f) {
    return fmt::format("  async save, {:<19} stall {:7.1f} ms per save = {:4.1f}% of the synchronous save "
                       "(snapshot {:.1f} + fence {:.1f} + commit {:.1f} ms; first save {:.0f} ms; committed {:.2f} s "
                       "after save())\n",
                       what, f.stall_s * 1e3, 100.0 * f.stall_s / r.sync_save_s, f.snapshot_s * 1e3, f.fence_s * 1e3,
                       f.commit_s * 1e3, f.first_stall_s * 1e3, f.total_s);
  };
  std::string out;
  out += fmt::format("checkpoint benchmark: {:.1f}M parameters, {:.2f} GB per save (fp32 values + 2 AdamW moments), "
                     "{} async saves per mode, simulated step {:.0f} ms\n",
                     static_cast<double>(r.parameters) / 1e6, static_cast<double>(r.bytes) / 1e9, r.async_saves,
                     r.step_s * 1e3);
  out += fmt::format("  sync save:                  {:8.3f} s ({:.0f} MB/s, fsync included)\n", r.sync_save_s,
                     static_cast<double>(r.bytes) / 1e6 / r.sync_save_s);
  out += line("blocking snapshot:", r.blocking);
  out += line("overlapped snapshot:", r.overlapped);
  out += fmt::format("  load (verify CRC + copy):   {:8.3f} s ({:.0f} MB/s)\n", r.load_s,
                     static_cast<double>(r.bytes) / 1e6 / r.load_s);
  out += fmt::format("  target: stall <= 5% of the synchronous save\n");
  return out;
}

}  // namespace lattice
