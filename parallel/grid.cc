// RankGrid: layout validation, coordinates and group membership; process group creation.
#include "parallel/grid.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

RankGrid::RankGrid(int world_size, int rank, int tp, int pp, int dp)
    : world_size_(world_size), rank_(rank), tp_(tp), pp_(pp), dp_(dp) {
  if (tp < 1) throw InputError(fmt::format("parallel.tensor must be at least 1 (got {})", tp));
  if (pp < 1) throw InputError(fmt::format("parallel.pipeline must be at least 1 (got {})", pp));
  if (dp < 0) {
    throw InputError(fmt::format(
        "parallel.data must be at least 1, or 0 / left out for world size / (tensor × pipeline) "
        "(got {})", dp));
  }
  LATTICE_CHECK(world_size >= 1, "world size {} < 1", world_size);
  if (dp == 0) {
    if (world_size % (tp * pp) != 0) {
      throw InputError(fmt::format(
          "the job has {} ranks (mpirun -np / srun -n; validate: --world-size), which is not divisible by "
          "parallel.tensor × parallel.pipeline = {} × {} = {}: change parallel.tensor or parallel.pipeline, or run "
          "a multiple of {} ranks",
          world_size, tp, pp, tp * pp, tp * pp));
    }
    dp_ = world_size / (tp * pp);
  } else if (static_cast<int64_t>(tp) * pp * dp != world_size) {
    throw InputError(fmt::format(
        "parallel.tensor × parallel.pipeline × parallel.data = {} × {} × {} = {} but the job has {} "
        "ranks (mpirun -np / srun -n; validate: --world-size): change one of them, or leave parallel.data out to "
        "use world size / (tensor × pipeline)",
        tp, pp, dp, static_cast<int64_t>(tp) * pp * dp, world_size));
  }
  LATTICE_CHECK(rank >= 0 && rank < world_size, "rank {} outside the world of {} ranks", rank, world_size);
  coords_ = coords_of(rank);
}

int RankGrid::rank_of(const GridCoords& c) const {
  LATTICE_CHECK(c.tp >= 0 && c.tp < tp_ && c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_,
                "grid coordinates tp {} dp {} pp {} outside tp {} × dp {} × pp {}", c.tp, c.dp,
                c.pp, tp_, dp_, pp_);
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

GridCoords RankGrid::coords_of(int rank) const {
  LATTICE_CHECK(rank >= 0 && rank < world_size_, "rank {} outside the world of {} ranks", rank,
                world_size_);
  return GridCoords{rank % tp_, (rank / tp_) % dp_, rank / (tp_ * dp_)};
}

std::vector<int> RankGrid::tp_group() const {
  std::vector<int> ranks;
  for (int t = 0; t < tp_; ++t) ranks.push_back(rank_of({t, coords_.dp, coords_.pp}));
  return ranks;
}

std::vector<int> RankGrid::dp_group() const {
  std::vector<int> ranks;
  for (int d = 0; d < dp_; ++d) ranks.push_back(rank_of({coords_.tp, d, coords_.pp}));
  return ranks;
}

std::vector<int> RankGrid::pp_group() const {
  std::vector<int> ranks;
  for (int p = 0; p < pp_; ++p) ranks.push_back(rank_of({coords_.tp, coords_.dp, p}));
  return ranks;
}

std::vector<int> RankGrid::embedding_group() const {
  if (!in_embedding_group()) return {};
  std::vector<int> ranks = {rank_of({coords_.tp, coords_.dp, 0})};
  if (pp_ > 1) ranks.push_back(rank_of({coords_.tp, coords_.dp, pp_ - 1}));
  return ranks;
}

std::string RankGrid::describe() const {
  return fmt::format("tp {}/{}, pp {}/{}, dp {}/{}", coords_.tp, tp_, coords_.pp, pp_, coords_.dp, dp_);
}

namespace {

void check_members(const Communicator* group, const std::vector<int>& expected, const RankGrid& grid) {
  LATTICE_CHECK(group != nullptr && group->world_ranks() == expected,
                "rank {} ({}): process group has world ranks [{}], the grid expects [{}]",
                grid.rank(), grid.describe(),
                group ? fmt::format("{}", fmt::join(group->world_ranks(), ", ")) : "none",
                fmt::join(expected, ", "));
}

}  // namespace

ProcessGroups make_process_groups(const RankGrid& grid, Communicator& world) {
  LATTICE_CHECK(world.size() == grid.world_size() && world.rank() == grid.rank(),
                "the grid is for rank {} of {}, the world communicator is rank {} of {}",
                grid.rank(), grid.world_size(), world.rank(), world.size());
  const GridCoords& c = grid.coords();
  const int tp = grid.tp_size(), dp = grid.dp_size();
  ProcessGroups groups;
  // Colors number the groups; keys order the members by the coordinate that varies in the group.
  groups.tp = world.split(c.dp + dp * c.pp, c.tp, "tp", fmt::format("pp {}, dp {}", c.pp, c.dp));
  groups.dp = world.split(c.tp + tp * c.pp, c.dp, "dp", fmt::format("tp {}, pp {}", c.tp, c.pp));
  groups.pp = world.split(c.tp + tp * c.dp, c.pp, "pp", fmt::format("tp {}, dp {}", c.tp, c.dp));
  groups.embedding = world.split(grid.in_embedding_group() ? c.tp + tp * c.dp : -1, c.pp, "embedding",
                                 fmt::format("first and last stage of tp {}, dp {}", c.tp, c.dp));
  check_members(groups.tp.get(), grid.tp_group(), grid);
  check_members(groups.dp.get(), grid.dp_group(), grid);
  check_members(groups.pp.get(), grid.pp_group(), grid);
  if (grid.in_embedding_group()) check_members(groups.embedding.get(), grid.embedding_group(), grid);
  return groups;
}

}  // namespace lattice
