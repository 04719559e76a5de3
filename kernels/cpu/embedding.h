// CPU embedding lookups: token table gather/scatter-add and learned position embeddings.
#pragma once

#include <cstdint>

namespace lattice::cpu {

// The position of the first id outside [0, vocab), or -1: for host code that checks ids it fills
// itself, with its own message (the trainer's micro-batches, the generator's prompt).
int64_t first_bad_index(const int32_t* ids, int64_t n, int64_t vocab);
// Throws lattice::Error naming `op`, the first bad id and its position if any id is outside [0, V).
void check_indices(const char* op, const char* what, const int32_t* ids, int64_t n, int64_t vocab);

// out[n, :] = table[ids[n], :]. ids must already be valid.
void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden);
// dtable[ids[n], :] += dout[n, :]; race-free: threads own disjoint column ranges.
void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden);
// x[b, t, :] += table[t, :].
void add_position_embedding(float* x, const float* table, int64_t batch, int64_t seq, int64_t hidden);
// dtable[t, :] += sum_b dx[b, t, :].
void position_embedding_backward(const float* dx, float* dtable, int64_t batch, int64_t seq, int64_t hidden);

// Vocab-parallel: the table holds rows [first_row, first_row + rows) of the vocabulary.
// out[n, :] = table[ids[n] - first_row, :] when the id falls there, else 0.
void embedding_forward_shard(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows);
// dtable[ids[n] - first_row, :] += dout[n, :] for the ids that fall in the shard.
void embedding_backward_shard(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows);
// Rows of flattened tokens that start at global token `first_token` of sequences of length seq:
// x[i, :] += table[(first_token + i) mod seq, :].
void add_position_embedding_tokens(float* x, const float* table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token);
// dtable[(first_token + i) mod seq, :] += dx[i, :]; threads own positions, rows summed in order.
void position_embedding_backward_tokens(const float* dx, float* dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token);

}  // namespace lattice::cpu
