// Every config shipped in configs/ parses, round trips and has sane model stats.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>

#include "trainer/config.h"
#include "trainer/model_stats.h"

using namespace lattice;
namespace fs = std::filesystem;

TEST_CASE("every shipped config parses") {
  // Tests run in the runfiles root of workspace `lattice`, where //configs puts configs/*.json.
  REQUIRE(fs::is_directory("configs"));
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator("configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string path = entry.path().string();
    INFO(path);
    names.insert(entry.path().filename().string());
    Config c;
    REQUIRE_NOTHROW(c = load_config(path));
    REQUIRE(config_to_json(parse_config(config_to_json(c), "round trip")) == config_to_json(c));
    REQUIRE(!c.data.path.empty());
    const ModelStats s = compute_model_stats(c);
    REQUIRE(s.num_params > 0);
    REQUIRE(s.flops_per_token > 0);
  }
  for (const char* expected : {"quickstart.json", "gpt2-124m.json", "llama-small.json", "test-tiny-gpt2.json",
                               "test-tiny-llama.json", "bench-gpt2-124m.json"}) {
    INFO(expected);
    REQUIRE(names.count(expected) == 1);
  }
}

TEST_CASE("shipped configs have the shapes they promise") {
  const Config q = load_config("configs/quickstart.json");
  REQUIRE(q.model.vocab_size == 257);
  REQUIRE(q.data.path == "runs/quickstart/data/fortunes");
  REQUIRE(q.logging.metrics_file == "runs/quickstart/metrics.jsonl");

  const Config g = load_config("configs/gpt2-124m.json");
  REQUIRE(g.model.num_layers == 12);
  REQUIRE(g.model.hidden_size == 768);
  REQUIRE(g.model.vocab_size == 50304);
  REQUIRE(g.model.seq_length == 1024);

  const Config l = load_config("configs/llama-small.json");
  REQUIRE(l.model.arch == Arch::kLlama);
  REQUIRE(l.model.num_kv_heads < l.model.num_attention_heads);
  REQUIRE(!l.model.tie_embeddings);

  const Config t = load_config("configs/test-tiny-llama.json");
  REQUIRE(t.model.num_kv_heads == 2);
  REQUIRE(t.data.path == "runs/test/data/tiny");
  REQUIRE(t.training.train_iters == 20);

  const Config b = load_config("configs/bench-gpt2-124m.json");
  REQUIRE(b.model.seq_length == 64);
  REQUIRE(b.training.micro_batch_size == 4);
  REQUIRE(b.training.global_batch_size == 4);
}
