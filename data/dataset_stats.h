// DatasetStats: what only a full read of an indexed dataset's tokens tells (its largest token id),
// read once and cached beside the dataset in PREFIX.stats.json, so a terabyte dataset pays once.
#pragma once

#include <cstdint>
#include <string>

#include "data/indexed_dataset.h"

namespace lattice {

struct DatasetStats {
  int64_t max_token_id = -1;  // -1: the dataset holds no tokens
  bool from_cache = false;    // read from PREFIX.stats.json (else computed now)
};

// PREFIX.stats.json for a dataset prefix.
std::string dataset_stats_path(const std::string& prefix);

// The stats of `dataset`: from PREFIX.stats.json when it was written for these exact .bin and .idx
// files (their sizes and modification times), else computed by streaming every sequence's tokens
// through bounded buffers on several threads and cached (written atomically; a directory that
// cannot be written is logged at info and left alone). A negative token id is an InputError naming
// the file.
DatasetStats dataset_stats(const IndexedDataset& dataset);

// Caches stats already known (`lattice data prepare` has seen every token) for the committed
// dataset PREFIX.bin/.idx, as dataset_stats() would.
void write_dataset_stats(const std::string& prefix, int64_t max_token_id);

}  // namespace lattice
