# shellcheck shell=sh
# slurm-preflight: what the cluster says of a pool, before anything of the
# run is queued: its partitions (scontrol show partition), each node's
# GPUs by partition (sinfo), whether srun has pyxis's --container-image
# (when the plan runs containers), and whether sbatch would take a job of
# the pool (sbatch --test-only: account, QOS, limits).
# Parameters: tf_args (a list of shell words: the pool's sbatch options,
# read with eval set --), tf_pyxis (1: look for pyxis), tf_exit_squeue
# (the exit code when scontrol fails).
# Prints "@partitions", scontrol's lines, "@nodes", sinfo's lines
# PARTITION|NODE|GRES, "@pyxis yes|no" (with tf_pyxis), "@test", what
# sbatch --test-only said, and "@rc CODE".
echo @partitions
scontrol show partition -o 2>&1 || exit "$tf_exit_squeue"
echo @nodes
sinfo -h -N -o '%P|%N|%G' 2>&1 || exit "$tf_exit_squeue"
if [ "$tf_pyxis" = 1 ]; then
	if srun --help 2>&1 | grep -q -e '--container-image'; then echo '@pyxis yes'; else echo '@pyxis no'; fi
fi
echo @test
eval "set -- $tf_args"
printf '#!/bin/sh\ntrue\n' | sbatch --test-only "$@" 2>&1
echo "@rc $?"
