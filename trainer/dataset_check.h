// The start-of-run check of the datasets a config names: every file exists and opens, and no token
// id reaches model.vocab_size — so a bad dataset fails before step 1, not when its sample comes up.
#pragma once

#include "trainer/config.h"

namespace lattice {

// Opens data.path or every data.blend dataset and compares its largest token id (dataset_stats:
// cached beside the dataset after the first read) with model.vocab_size. A missing or damaged file
// or an id >= model.vocab_size is an InputError naming the field, the file, the id and the size; so is
// a data.blend of datasets whose recorded tokenizers differ (the same id would mean different text).
void check_datasets(const Config& config);

}  // namespace lattice
