// Test support for sharded checkpoints: tensor-parallel parameter specs built by hand (Megatron's
// column/row split, vocabulary padding, replicas on tp rank > 0) and values defined by (name, global
// element index), so any layout's store can be filled and checked against the one-process model.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "model/model_config.h"
#include "model/model_parameters.h"
#include "model/parameter_store.h"

namespace lattice::testing {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The one-process specs of `c` split for tp rank r of t: column-parallel q/k/v/gate/up (rows, with
// their biases), row-parallel o/down (columns; their biases replicated), vocabulary rows padded to a
// multiple of 128·t, norms and position embeddings replicated. Replicas on r > 0.
inline std::vector<ParamSpec> tp_shard_specs(const ModelConfig& c, int r, int t) {
  std::vector<ParamSpec> out;
  const int64_t padded_vocab = (c.vocab_size + 128 * t - 1) / (128 * t) * (128 * t);
  for (ParamSpec s : model_parameter_specs(c)) {
    s.fill_defaults();
    const Shape g = s.global_shape;
    auto split = [&](size_t dim) {
      const int64_t part = g[dim] / t;
      s.shape[dim] = part;
      s.box[dim] = part;
      s.offset[dim] = part * r;
    };
    const bool column = s.name.find("q_proj") != std::string::npos || s.name.find("k_proj") != std::string::npos ||
                        s.name.find("v_proj") != std::string::npos || s.name.find("gate_proj") != std::string::npos ||
                        s.name.find("up_proj") != std::string::npos;
    const bool row = s.name.find("o_proj") != std::string::npos || s.name.find("down_proj") != std::string::npos;
    if (s.name == "embedding.word_embeddings.weight" || s.name == "lm_head.weight") {
      const int64_t rows = padded_vocab / t;
      const int64_t begin = rows * r;
      s.shape[0] = rows;
      s.offset[0] = std::min(begin, g[0]);
      s.box[0] = std::max<int64_t>(0, std::min(rows, g[0] - begin));
    } else if (column) {
      split(0);
    } else if (row && ends_with(s.name, ".weight")) {
      split(1);
    } else {
      s.replica = r > 0;
    }
    out.push_back(s);
  }
  return out;
}

// The value of element `index` (row-major in the global tensor) of parameter `name`.
inline float global_value(const std::string& name, int64_t index, int salt) {
  const double h = static_cast<double>(name_stream(name) % 1000003);
  return static_cast<float>(std::sin(0.001 * h + 0.37 * static_cast<double>(index) + 1.7 * salt));
}

// Calls f(local flat index, global flat index) for every element of spec's box.
template <typename F>
void for_each_box_element(const ParamSpec& s, F&& f) {
  const size_t rank = s.shape.size();
  const int64_t n = shape_numel(s.box);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t local = 0, global = 0;
    for (size_t d = 0; d < rank; ++d) {
      local = local * s.shape[d] + idx[d];
      global = global * s.global_shape[d] + s.offset[d] + idx[d];
    }
    f(local, global);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < s.box[d]) break;
      idx[d] = 0;
    }
  }
}

// Fills `flat` (the store's flat layout) with global_value(·, ·, salt) inside every box, 0 elsewhere.
inline void fill_by_global(const ParameterStore& store, Tensor& flat, int salt) {
  float* p = flat.f32();
  for (int64_t i = 0; i < flat.numel(); ++i) p[i] = 0.0f;
  for (size_t i = 0; i < store.count(); ++i) {
    const ParamSpec& s = store.spec(i);
    const int64_t base = store.offset(i);
    for_each_box_element(s, [&](int64_t local, int64_t global) { p[base + local] = global_value(s.name, global, salt); });
  }
}

// Elements of `flat` that differ (bitwise) from fill_by_global(store, ·, salt).
inline int64_t count_mismatches(const ParameterStore& store, const Tensor& flat, int salt) {
  Tensor expect = Tensor::empty(flat.shape());
  fill_by_global(store, expect, salt);
  int64_t bad = 0;
  for (int64_t i = 0; i < flat.numel(); ++i) bad += flat.f32()[i] != expect.f32()[i];
  return bad;
}

// A store with AdamW-shaped moments, all three filled by (name, global index, salt): what a
// checkpoint must carry from one layout to another.
struct Run {
  std::unique_ptr<ParameterStore> store;
  Tensor exp_avg, exp_avg_sq;
  void fill(int salt) {
    fill_by_global(*store, store->flat_values(), salt);
    fill_by_global(*store, exp_avg, salt + 100);
    fill_by_global(*store, exp_avg_sq, salt + 200);
  }
  // What a save writes and a load fills: the values and, with `moments`, both moments.
  SaveSources sources(bool moments = true) const {
    return {&store->flat_values(), moments ? &exp_avg : nullptr, moments ? &exp_avg_sq : nullptr};
  }
  LoadTargets targets(bool moments = true) {
    return {store.get(), &store->flat_values(), moments ? &exp_avg : nullptr, moments ? &exp_avg_sq : nullptr};
  }
  int64_t mismatches(int salt) const {
    return count_mismatches(*store, store->flat_values(), salt) + count_mismatches(*store, exp_avg, salt + 100) +
           count_mismatches(*store, exp_avg_sq, salt + 200);
  }
};

inline Run make_run(std::vector<ParamSpec> specs, int salt) {
  Run r;
  r.store = std::make_unique<ParameterStore>(std::move(specs), host_context());
  r.exp_avg = Tensor::zeros({r.store->numel()});
  r.exp_avg_sq = Tensor::zeros({r.store->numel()});
  r.fill(salt);
  return r;
}

// The slice of a resolved config the checkpoint compares.
inline nlohmann::json model_json(const ModelConfig& c) {
  return {{"model",
           {{"arch", arch_name(c.arch)},
            {"num_layers", c.num_layers},
            {"hidden_size", c.hidden_size},
            {"num_attention_heads", c.num_attention_heads},
            {"num_kv_heads", c.num_kv_heads},
            {"ffn_hidden_size", c.ffn_hidden_size},
            {"vocab_size", c.vocab_size},
            {"seq_length", c.seq_length},
            {"tie_embeddings", c.tie_embeddings},
            {"bias", c.bias},
            {"init_from", c.init_from}}}};
}

}  // namespace lattice::testing
