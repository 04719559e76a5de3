// RankGrid: where this rank sits in world = TP × DP × PP (TP fastest, then DP, then PP; CP = 1
// for now) and who its tp/dp/pp/embedding peers are; make_process_groups builds their Communicators.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace lattice {

struct GridCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  bool operator==(const GridCoords&) const = default;
};

class RankGrid {
 public:
  // tp, pp, dp: parallel.tensor, parallel.pipeline, parallel.data; dp = 0 means
  // world_size / (tp × pp). Throws InputError naming the fields when the layout does not fit.
  RankGrid(int world_size, int rank, int tp, int pp, int dp = 0);

  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  int tp_size() const { return tp_; }
  int pp_size() const { return pp_; }
  int dp_size() const { return dp_; }

  const GridCoords& coords() const { return coords_; }
  int tp_rank() const { return coords_.tp; }
  int dp_rank() const { return coords_.dp; }
  int pp_rank() const { return coords_.pp; }
  bool is_first_stage() const { return coords_.pp == 0; }
  bool is_last_stage() const { return coords_.pp == pp_ - 1; }

  // rank = tp + TP × (dp + DP × pp)
  int rank_of(const GridCoords& c) const;
  GridCoords coords_of(int rank) const;

  // World ranks of this rank's groups, in group rank order (= the varying coordinate).
  std::vector<int> tp_group() const;
  std::vector<int> dp_group() const;
  std::vector<int> pp_group() const;
  // First and last pipeline stage of this rank's (tp, dp) column (one rank when pp == 1); empty
  // for a middle stage, which belongs to no embedding group.
  std::vector<int> embedding_group() const;
  bool in_embedding_group() const { return is_first_stage() || is_last_stage(); }

  // "tp 1/2, pp 0/2, dp 1/2"
  std::string describe() const;

 private:
  int world_size_, rank_, tp_, pp_, dp_;
  GridCoords coords_;
};

// This rank's groups. embedding is nullptr on middle pipeline stages.
struct ProcessGroups {
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> embedding;
};

// Collective over `world` (every rank calls it): splits it into the tp, dp, pp and embedding
// groups (in that order on every rank) and checks each group's members against the grid.
ProcessGroups make_process_groups(const RankGrid& grid, Communicator& world);

}  // namespace lattice
