#!/usr/bin/env bash
# tools/bench_plan.sh end to end with its gross bounds: the calibration lines `lattice bench` and
# `bench --comm` print make a --gpu FILE that `lattice plan` takes; the plan has a row for each of six
# one- and two-process layouts; the `--set` strings of every row train under mpirun; and each
# prediction is within 50% of the measured step (a calibration figure misread, the dominant cost
# counted twice; plan_published_test catches the model's finer errors). The benchmark's own bounds
# (25% per layout, the ranking within 10%) are not asserted here: on a shared 2-core VM a two-process
# step moves by 20-30% from run to run, and a layout out of bounds is trained once more, the faster
# median counting (a neighbour only slows a step; in one CI run tp2 measured -50.3%, 5.42 s against
# 3.37 s here on a quiet machine). Tagged exclusive: it times steps.
source tests/parallel/mpi_env.sh
WORK=$TEST_TMPDIR LATTICE=trainer/lattice BOUNDS=gross tools/bench_plan.sh 4
