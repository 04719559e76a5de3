// StepReadback: one device -> host copy per training step and per evaluation pass (counted through
// a backend table whose copy_to_host counts), with the bits of a direct host computation; and no
// device-side check of token ids in the step (on a GPU each is a read-back: StepBatches checks them
// on the host).
#include <catch2/catch.hpp>


#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/test_util.h"
#include "tests/trainer/random_tokens.h"
#include "trainer/config.h"
#include "trainer/step_readback.h"
#include "trainer/train_loop.h"

using namespace lattice;

namespace {

int copies_to_host = 0, index_checks = 0;

void counted_copy_to_host(const void* src, void* host_dst, int64_t bytes) {
  ++copies_to_host;
  cpu::backend().copy_to_host(src, host_dst, bytes);
}

void counted_check_indices(const char* op, const char* what, const int32_t* ids, int64_t n, int64_t vocab) {
  ++index_checks;
  cpu::backend().check_indices(op, what, ids, n, vocab);
}

// `base` with its device -> host copies and its index checks counted.
Backend counting(Backend base) {
  base.copy_to_host = &counted_copy_to_host;
  base.check_indices = &counted_check_indices;
  return base;
}

}  // namespace

TEST_CASE("one read copies the loss and gradient slots once, with the bits of a host computation") {
  const Backend device = counting(test::cuda_stand_in());
  test::ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext ctx(Device::kCuda);
  const Tensor host_losses = test::random_tensor({1000}, 1);
  const Tensor host_grads = test::random_tensor({70000}, 2);
  const Tensor losses = ctx.to_device(host_losses), grads = ctx.to_device(host_grads);
  const std::vector<Tensor> views = {grads.slice_flat(0, {5}), grads.slice_flat(5, {60000}),
                                     grads.slice_flat(60005, {9995})};

  StepReadback readback(ctx, 2, 3);
  readback.enqueue_loss_sum(1, losses);
  readback.enqueue_grad_sum_squares(views);
  copies_to_host = 0;
  readback.read();
  CHECK(copies_to_host == 1);

  double loss = 0;  // the serial double loop, as a mean times the count
  for (int64_t i = 0; i < host_losses.numel(); ++i) loss += host_losses.f32()[i];
  loss = loss / 1000.0 * 1000.0;
  double norm = 0.0;  // the views added from 0.0 in order
  for (const Tensor& v : {host_grads.slice_flat(0, {5}), host_grads.slice_flat(5, {60000}),
                          host_grads.slice_flat(60005, {9995})})
    norm += ops::sum_squares(v);
  CHECK(readback.loss_sum(1) == loss);
  CHECK(readback.loss_sum(0) == 0.0);  // nothing enqueued
  CHECK(readback.grad_sum_squares() == norm);
  CHECK_THROWS_AS(readback.enqueue_loss_sum(2, losses), Error);
  CHECK_THROWS_AS(readback.enqueue_grad_sum_squares({grads}), Error);
}

TEST_CASE("a training run reads back once per step and once per evaluation pass") {
  const Backend cpu = counting(cpu::backend());
  test::ScopedBackend registered(Device::kCpu, &cpu);
  Config c = parse_config(nlohmann::json::parse(R"({"model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 32,
      "num_attention_heads": 4, "vocab_size": 257, "seq_length": 16},
      "training": {"micro_batch_size": 2, "global_batch_size": 4, "train_iters": 5, "eval_interval": 2,
                   "eval_iters": 3},
      "logging": {"metrics_file": ""}})"),
                          "tiny");
  const MicroBatchSource tokens = test::random_tokens(257);
  copies_to_host = 0;
  index_checks = 0;
  const TrainResult r = train_on(c, TrainOptions{}, tokens, tokens);
  CHECK(copies_to_host == 5 + 3);  // 5 steps; evaluations after steps 2, 4 and 5 (the last)
  CHECK(index_checks == 0);        // the embedding and the loss take the ids as checked
  CHECK(r.last_val_loss > 0);
}

TEST_CASE("the ops check ids on the device unless told they are checked") {
  const Backend cpu = counting(cpu::backend());
  test::ScopedBackend registered(Device::kCpu, &cpu);
  Tensor ids = Tensor::zeros({4}, DType::kI32), table = Tensor::zeros({8, 3}), out = Tensor::zeros({4, 3});
  index_checks = 0;
  ops::embedding_forward(ids, table, out);
  CHECK(index_checks == 1);
  ops::embedding_forward(ids, table, out, ops::Ids::kChecked);
  CHECK(index_checks == 1);
  ids.i32()[2] = 8;
  CHECK_THROWS_WITH(ops::embedding_forward(ids, table, out),
                    Catch::Contains("embedding_forward: token id 8 at position 2 is outside [0, 8)"));
}
