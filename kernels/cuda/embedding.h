// CUDA embedding lookups: token table gather/scatter-add and learned position embeddings. Raw
// forms of the Backend entries of the same names (see kernels/cpu/embedding.h for the contracts);
// every kernel is enqueued on lattice::cuda::compute_stream(). Plain C++ so g++ sources can include it.
#pragma once

#include <cstdint>

namespace lattice::cuda {

// Position of the first id outside [0, vocab) (-1 if none) and that id in *bad_id; synchronizes.
// (check_indices itself throws, so it lives in g++ code on top of this.)
int64_t first_bad_index(const int32_t* ids, int64_t n, int64_t vocab, int32_t* bad_id);

// out[n, :] = table[ids[n], :]. ids must already be valid.
void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden);
// dtable[ids[n], :] += dout[n, :], each row's contributions added in token order (deterministic,
// bit-identical to the CPU).
void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden);
// x[b, t, :] += table[t, :].
void add_position_embedding(float* x, const float* table, int64_t batch, int64_t seq, int64_t hidden);
// dtable[t, :] += sum_b dx[b, t, :], summed in b order.
void position_embedding_backward(const float* dx, float* dtable, int64_t batch, int64_t seq, int64_t hidden);

// Vocab-parallel: the table holds rows [first_row, first_row + rows) of the vocabulary.
// out[n, :] = table[ids[n] - first_row, :] when the id falls there, else 0.
void embedding_forward_shard(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows);
// dtable[ids[n] - first_row, :] += dout[n, :] for the ids that fall in the shard, in token order.
void embedding_backward_shard(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows);
// x[i, :] += table[(first_token + i) mod seq, :].
void add_position_embedding_tokens(float* x, const float* table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token);
// dtable[(first_token + i) mod seq, :] += dx[i, :], rows of one position summed in i order.
void position_embedding_backward_tokens(const float* dx, float* dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token);

}  // namespace lattice::cuda
