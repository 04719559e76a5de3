// CUDA embedding lookups: token table gather/scatter-add and learned position embeddings. The typed
// forms of the Backend entries (kernels/typed_kernels.h; the contracts are kernels/cpu/embedding.h's):
// a whole-vocabulary table is the shard with first_row 0, the [B, T, H] position embedding the token
// form with first_token 0. Every kernel is enqueued on lattice::cuda::compute_stream(). Plain C++ so
// g++ sources can include it.
#pragma once

#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice::cuda {

// Position of the first id outside [0, vocab) (-1 if none) and that id in *bad_id; synchronizes.
// (check_indices itself throws, so it lives in g++ code on top of this.)
int64_t first_bad_index(const int32_t* ids, int64_t n, int64_t vocab, int32_t* bad_id);

// The table holds rows [first_row, first_row + rows) of the vocabulary.
// out[n, :] = table[ids[n] - first_row, :] when the id falls there, else 0. ids must already be valid.
void embedding_forward_shard(const int32_t* ids, DataIn table, DataOut out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows);
// dtable[ids[n] - first_row, :] += dout[n, :] for the ids that fall in the shard, each row's
// contributions added in token order (deterministic, bit-identical to the CPU). dtable is f32.
void embedding_backward_shard(const int32_t* ids, DataIn dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows);
// x[i, :] += table[(first_token + i) mod seq, :].
void add_position_embedding_tokens(DataOut x, DataIn table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token);
// dtable[(first_token + i) mod seq, :] += dx[i, :], rows of one position summed in i order.
void position_embedding_backward_tokens(DataIn dx, DataOut dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token);

}  // namespace lattice::cuda
