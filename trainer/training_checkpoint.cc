// Resume and save for the training loop (see training_checkpoint.h).
#include "trainer/training_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_reader.h"
#include "kernels/error.h"
#include "trainer/lr_schedule.h"

namespace lattice {

std::optional<std::string> checkpoint_to_load(const CheckpointConfig& config) {
  if (config.load == "none") return std::nullopt;
  if (config.load == "auto") {
    if (config.dir.empty()) return std::nullopt;
    return find_latest_checkpoint(config.dir);
  }
  return resolve_checkpoint(config.load);
}

namespace {

using ConfigKey = std::pair<const char*, const char*>;  // section, key

// "section.key saved -> now" for each of `keys` that the checkpoint's config holds and `now` changes,
// unless `same` says the two values are one (a path spelt another way).
std::vector<std::string> changed_fields(
    const nlohmann::json& saved, const nlohmann::json& now, std::initializer_list<ConfigKey> keys,
    const std::function<bool(const ConfigKey&, const nlohmann::json&, const nlohmann::json&)>& same = {}) {
  std::vector<std::string> changes;
  for (const ConfigKey& k : keys) {
    const auto& [section, key] = k;
    if (!saved.contains(section) || !saved[section].contains(key)) continue;
    const nlohmann::json& before = saved[section][key];
    const nlohmann::json& after = now[section][key];
    if (before == after || (same && same(k, before, after))) continue;
    changes.push_back(fmt::format("{}.{} {} -> {}", section, key, before.dump(), after.dump()));
  }
  return changes;
}

// The LR schedule is a function of training.train_iters and these optimizer keys: a resume under
// other values continues on another curve than the one the checkpoint was trained on. Warns naming
// every changed field and the learning rate at the next step under both.
void warn_on_schedule_change(const CheckpointMetadata& meta, const Config& config, const nlohmann::json& now,
                             const std::string& dir) {
  const nlohmann::json& saved = meta.config;
  const std::vector<std::string> changes =
      changed_fields(saved, now,
                     {{"training", "train_iters"}, {"optimizer", "lr"}, {"optimizer", "min_lr"},
                      {"optimizer", "warmup_iters"}, {"optimizer", "decay"}, {"optimizer", "decay_iters"}});
  if (changes.empty()) return;
  const Config old = parse_config(nlohmann::json{{"training", saved["training"]}, {"optimizer", saved["optimizer"]}},
                                  dir + "/metadata.json");
  // The first step this run trains where the two schedules differ, over the steps both runs would
  // train (at least the next one): a longer train_iters with a fixed decay_iters only adds a tail.
  const int64_t next = meta.state.step + 1;
  const int64_t last = std::max(next, std::min(old.training.train_iters, config.training.train_iters));
  const auto lr_now = [&](int64_t step) { return learning_rate(config.optimizer, config.training.train_iters, step); };
  const auto lr_then = [&](int64_t step) { return learning_rate(old.optimizer, old.training.train_iters, step); };
  int64_t differs = next;
  while (differs <= last && lr_now(differs) == lr_then(differs)) ++differs;
  if (differs > last) {
    spdlog::info("resuming with {}: the learning rate of every step through {} is the checkpoint's schedule's",
                 fmt::join(changes, ", "), last);
    return;
  }
  spdlog::warn("resuming with another learning-rate schedule than the checkpoint's ({}): step {} trains at lr {:.4e} "
               "instead of {:.4e}. To continue the checkpoint's schedule, set these back (to split a run into jobs use "
               "training.exit_interval, not a different training.train_iters)",
               fmt::join(changes, ", "), differs, lr_now(differs), lr_then(differs));
}

// The data stream a run continues is a function of these keys: the checkpoint's consumed-samples
// count indexes the sample order they define. A resume under other values silently trains on
// another stream (Megatron-LM does not check either); a changed split also moves documents between
// the train and validation splits. Warns naming every changed field.
void warn_on_data_change(const CheckpointMetadata& meta, const nlohmann::json& now) {
  // The same dataset, spelt another way (relative to where that run started, or absolute).
  const auto same_dataset = [](const ConfigKey& k, const nlohmann::json& before, const nlohmann::json& after) {
    if (std::string(k.second) != "path" || !before.is_string() || !after.is_string()) return false;
    std::error_code ec;
    return std::filesystem::equivalent(before.get<std::string>() + ".idx", after.get<std::string>() + ".idx", ec);
  };
  const std::vector<std::string> changes =
      changed_fields(meta.config, now,
                     {{"data", "path"}, {"data", "blend"}, {"data", "split"}, {"data", "shuffle"}, {"data", "seed"}},
                     same_dataset);
  if (changes.empty()) return;
  const bool split_changed =
      std::any_of(changes.begin(), changes.end(), [](const std::string& c) { return c.rfind("data.split ", 0) == 0; });
  spdlog::warn("resuming with other data settings than the checkpoint's ({}): its {} consumed samples now index "
               "another sample order, so training does not continue the checkpoint's data stream{}. To continue it, "
               "set these back",
               fmt::join(changes, ", "), meta.state.consumed_samples,
               split_changed ? "; and another data.split moves documents between the train and validation splits "
                               "(validation may score documents already trained on)"
                             : "");
}

}  // namespace

CheckpointMetadata check_checkpoint_fits(const Config& config, const std::string& dir) {
  const CheckpointMetadata meta = read_checkpoint_metadata(dir);
  check_model_config(meta.config, config_to_json(config), dir,
                     "set these fields to the checkpoint's values, or set checkpoint.load to \"none\" (or another "
                     "checkpoint) to start without it");
  // The LR schedule continues at the checkpoint's step; a schedule position that says otherwise
  // means the metadata does not describe this training state.
  if (meta.state.lr_schedule_step != meta.state.step)
    throw InputError(fmt::format("checkpoint '{}/metadata.json': lr_schedule.step is {} but step is {}; the LR "
                                 "schedule would not continue where the run stopped. The metadata is damaged or "
                                 "was edited: restore it, or load another checkpoint (checkpoint.load)",
                                 dir, meta.state.lr_schedule_step, meta.state.step));
  if (!meta.optimizer_state)
    throw InputError(fmt::format("checkpoint '{}' holds weights only (no AdamW moments), so training cannot continue "
                                 "from it exactly: export it (lattice export --checkpoint {} --output DIR) and start "
                                 "from those weights with model.init_from=DIR/model.safetensors and "
                                 "checkpoint.load=none",
                                 dir, dir));
  // The data must continue at the checkpoint's sample: global batch g starts at g × B.
  const int64_t B = config.training.global_batch_size;
  if (meta.state.consumed_samples != meta.state.step * B) {
    const auto saved_b = meta.config.contains("training") ? meta.config["training"].value("global_batch_size", int64_t{0})
                                                          : int64_t{0};
    if (saved_b == B)  // the batch is the checkpoint's own: the count itself does not add up
      throw InputError(fmt::format("checkpoint '{}/metadata.json': consumed_samples is {} but step {} × "
                                   "training.global_batch_size {} is {}; the metadata is damaged or was edited: "
                                   "restore it, or load another checkpoint (checkpoint.load)",
                                   dir, meta.state.consumed_samples, meta.state.step, B, meta.state.step * B));
    throw InputError(fmt::format("checkpoint '{}' was saved after step {} with {} samples consumed (global batch {}); "
                                 "training.global_batch_size {} would not continue at that sample: set "
                                 "training.global_batch_size to {}",
                                 dir, meta.state.step, meta.state.consumed_samples, saved_b, B, saved_b));
  }
  return meta;
}

std::string describe_checkpoint_layout(const CheckpointLayout& l) {
  return fmt::format("{} rank(s): tensor {} × pipeline {} × data {}, {} virtual stage(s), distributed optimizer {}",
                     l.world_size, l.tensor, l.pipeline, l.data, l.virtual_stages,
                     l.distributed_optimizer ? "on" : "off");
}

TrainingCheckpoint::TrainingCheckpoint(const Config& config, const ParallelLayout& layout, Optimizer& optimizer,
                                       Device device, Communicator* world, Communicator* dp)
    : config_(config), optimizer_(optimizer) {
  if (config.checkpoint.dir.empty()) return;
  CheckpointWriterOptions o;
  o.dir = config.checkpoint.dir;
  o.async = config.checkpoint.async;
  o.keep_last = config.checkpoint.keep_last;
  // The copy into the host buffer runs on the writer thread during the next forward/backward;
  // before_optimizer_step() fences it.
  o.overlap_snapshot = config.checkpoint.async;
  o.device = device;
  CheckpointLayout l;
  l.world_size = layout.world_size;
  l.tensor = layout.tensor;
  l.pipeline = layout.pipeline;
  l.data = layout.data;
  l.virtual_stages = layout.virtual_stages;
  l.distributed_optimizer = optimizer.sharded();
  // The metadata's config names its paths absolutely: generate and export read them from anywhere.
  const nlohmann::json recorded = config_to_json(with_absolute_paths(config));
  writer_ = std::make_unique<CheckpointWriter>(o, CheckpointGroups{world, dp}, recorded, l);
  // The buffers a save fills, allocated now rather than inside the first save's stall.
  writer_->reserve(optimizer.buffer(), /*optimizer_state=*/true);
  optimizer.reserve_state_copies();
}

TrainingCheckpoint::~TrainingCheckpoint() = default;

int64_t TrainingCheckpoint::resume() {
  const std::optional<std::string> dir = checkpoint_to_load(config_.checkpoint);
  if (!dir) {
    if (config_.checkpoint.load == "auto" && !config_.checkpoint.dir.empty())
      spdlog::info("checkpoint.load auto: no checkpoint in {} yet; starting from step 0", config_.checkpoint.dir);
    if (config_.checkpoint.load == "none" && !config_.checkpoint.dir.empty()) {
      const std::vector<int64_t> steps = committed_steps(config_.checkpoint.dir);
      if (!steps.empty())
        spdlog::warn("checkpoint.load none: starting from step 0 in checkpoint.dir {}, which holds checkpoints up to "
                     "{}: this run's saves replace those of the same steps, and `latest` then names this run's",
                     config_.checkpoint.dir, iter_dir_name(steps.back()));
    }
    if (writer_) writer_->set_resumed_step(0);
    return 0;
  }
  const CheckpointMetadata meta = check_checkpoint_fits(config_, *dir);
  // This rank's state straight from the files (sharded: its shard alone), then the parameters from it.
  LoadTargets targets{&optimizer_.buffer(), &optimizer_.main_params(), &optimizer_.exp_avg(), &optimizer_.exp_avg_sq()};
  for (const Optimizer::StateRange& r : optimizer_.state_ranges())
    targets.ranges.push_back({r.flat_offset, r.numel, r.state_offset, r.main_offset});
  targets.target_numel = optimizer_.exp_avg().numel();
  LoadReport read;
  targets.report = &read;
  load_checkpoint(*dir, config_to_json(config_), targets);
  optimizer_.params_from_main();
  optimizer_.set_step_count(meta.state.optimizer_step_count);
  // Nothing left to train (the loop says so): no "continues at step N+1 of N".
  const int64_t iters = config_.training.train_iters;
  const bool continues = meta.state.step < iters;
  spdlog::info("resumed from {}: step {}, {} samples consumed, optimizer step {}; written by {}; this rank read "
               "{:.1f} of its {:.1f} MB{}",
               *dir, meta.state.step, meta.state.consumed_samples, meta.state.optimizer_step_count,
               describe_checkpoint_layout(meta.layout), read.bytes_read / 1e6, read.checkpoint_bytes / 1e6,
               continues ? fmt::format("; training continues at step {} of {}", meta.state.step + 1, iters) : "");
  // A path that is not the newest of checkpoint.dir: a rollback, or a fine-tune from another run's
  // checkpoint. A requeued job with the same arguments would go back there every time.
  if (config_.checkpoint.load != "auto" && !config_.checkpoint.dir.empty()) {
    const std::vector<int64_t> steps = committed_steps(config_.checkpoint.dir);
    if (!steps.empty() && steps.back() > meta.state.step)
      spdlog::warn("checkpoint.load names {} (step {}), but checkpoint.dir {} holds later checkpoints, up to {}: this "
                   "run goes on from step {} and its saves replace those of the same steps. A job restarted with this "
                   "same checkpoint.load (a requeue, launch_mpirun.sh's restarts) starts from step {} again: once this "
                   "run has saved, restart it with checkpoint.load=auto",
                   *dir, meta.state.step, config_.checkpoint.dir, iter_dir_name(steps.back()), meta.state.step + 1,
                   meta.state.step);
  }
  if (continues) {
    const nlohmann::json now = config_to_json(config_);
    warn_on_schedule_change(meta, config_, now, *dir);
    warn_on_data_change(meta, now);
  }
  last_saved_step_ = meta.state.step;
  if (writer_) writer_->set_resumed_step(meta.state.step);
  return meta.state.step;
}

bool TrainingCheckpoint::save_due(int64_t step) const {
  return writer_ && config_.checkpoint.save_interval > 0 && step % config_.checkpoint.save_interval == 0;
}

void TrainingCheckpoint::poll() {
  if (writer_) writer_->try_commit();
}

void TrainingCheckpoint::before_optimizer_step() {
  if (writer_) writer_->wait_snapshot();
}

void TrainingCheckpoint::save(int64_t step) {
  LATTICE_CHECK(writer_ != nullptr, "save without checkpoint.dir");
  // The previous save may still be copying the gathered state (overlapped snapshot).
  writer_->wait_snapshot();
  CheckpointState state;
  state.step = step;
  state.consumed_samples = step * config_.training.global_batch_size;
  state.optimizer_step_count = optimizer_.step_count();
  state.lr_schedule_step = step;
  state.seed = config_.training.seed;
  if (!optimizer_.sharded()) {
    const FlatOptimizerState flat = optimizer_.gather_state();  // the optimizer's own tensors
    writer_->save(optimizer_.buffer(), {&flat.main_params, &flat.exp_avg, &flat.exp_avg_sq}, state);
  } else {
    // The distributed optimizer's state goes from its dp shards, bucket by bucket, straight into the
    // host snapshot: the whole model's state is never on one rank.
    writer_->save(optimizer_.buffer(), /*optimizer_state=*/true, [&](const ShardPlan& plan, Tensor& staging) {
      std::vector<StatePiece> pieces;
      for (const ShardItem& item : plan.items) {
        const StateKind kind = item.kind == kModelKind    ? StateKind::kMainParams
                               : item.kind == kExpAvgKind ? StateKind::kExpAvg
                                                          : StateKind::kExpAvgSq;
        pieces.push_back({kind, item.flat_offset, staging.slice_flat(item.staging_offset, {item.numel})});
      }
      return optimizer_.copy_state(pieces, /*moments=*/true);
    }, state);
  }
  last_saved_step_ = step;
}

void TrainingCheckpoint::finish() {
  if (writer_) writer_->finish();
}

}  // namespace lattice
