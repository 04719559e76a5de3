// Transformer: the whole model as one chunk.
#include "model/transformer.h"

#include "kernels/error.h"

namespace lattice {

Transformer::Transformer(const ModelConfig& config, ParameterStore& params, int64_t micro_batch_size)
    : config_(config), batch_(micro_batch_size), chunk_(config, ModelLayout{}, 0, params, TensorParallel{}, micro_batch_size, 1) {}

void Transformer::forward(const Tensor& ids, const Tensor& targets, Tensor& token_losses) {
  LATTICE_CHECK(ids.shape() == Shape({batch_, config_.seq_length}) && targets.shape() == ids.shape(),
                "micro-batch ids {} / targets {} do not match [{}, {}]", ids.describe(), targets.describe(), batch_,
                config_.seq_length);
  chunk_.forward(0, ids, targets, none_, none_, token_losses);
}

void Transformer::backward(const Tensor& ids, const Tensor& targets, float grad_scale) {
  chunk_.backward(0, ids, targets, none_, grad_scale, none_);
}

}  // namespace lattice
