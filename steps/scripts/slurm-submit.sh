# shellcheck shell=sh
# slurm-submit: queues a job with sbatch, or adopts the job of that id if
# its directory names one Slurm queued before (a retry or a resume never
# queues twice).
# Parameters: tf_dir (the job's directory on the shared filesystem; may
# start with ~/), tf_job (the job id, its Slurm job name), tf_cmd (the
# command, written to cmd.sh), tf_pool (the plan's instance: the pool),
# tf_run (the run id), tf_env (a list of shell words: the names of the
# secrets the job gets, already exported by the secrets prelude, read
# with eval set --), tf_args (a list of shell words: sbatch's options,
# read with eval set --), tf_batch (the batch script, sent to sbatch on
# stdin), tf_pyxis (1: the job runs in a container, which needs pyxis),
# tf_exit_jobdir, tf_exit_sbatch, tf_exit_pyxis (exit codes).
# Needs home. Prints "launched slurm:ID" or "adopted slurm:ID".
#
# The secrets go into DIR/env (0600), which the job reads and teardown
# removes; they are unset before sbatch runs, so neither sbatch's
# environment (which slurmctld keeps with the job) nor the batch script
# holds them.
tf_home "$tf_dir"
d=$tf_h
if ! mkdir -p "$d" 2>/dev/null; then echo "cannot create the job directory $d" >&2; exit "$tf_exit_jobdir"; fi
if [ -s "$d/id" ]; then
	read -r tf_id < "$d/id"
	echo "adopted slurm:$tf_id"
	exit 0
fi
if [ "$tf_pyxis" = 1 ] && ! srun --help 2>&1 | grep -q -e '--container-image'; then
	echo "the job has an image, but this cluster's srun has no --container-image: it has no container plugin (pyxis); run the command without image, or on a cluster with pyxis" >&2
	exit "$tf_exit_pyxis"
fi
printf '%s\n' "$tf_cmd" > "$d/cmd.sh" || exit "$tf_exit_jobdir"
printf '%s\n' "$tf_run" > "$d/run" || exit "$tf_exit_jobdir"
printf '%s\n' "$tf_pool" > "$d/pool" || exit "$tf_exit_jobdir"
rm -f "$d/rc" "$d/canceled"
: > "$d/env" || exit "$tf_exit_jobdir"
eval "set -- $tf_env"
for tf_n in "$@"; do
	eval "tf_v=\${$tf_n}"
	printf '%s=%s\n' "$tf_n" "$tf_v" >> "$d/env" || exit "$tf_exit_jobdir"
	unset "$tf_n"
done
unset tf_v
printf '%s' "$tf_batch" > "$d/job.sh" || exit "$tf_exit_jobdir"
eval "set -- $tf_args"
tf_out=$(sbatch "$@" --output="$d/log" --chdir="$d" < "$d/job.sh" 2>&1) || {
	printf '%s\n' "$tf_out" >&2
	exit "$tf_exit_sbatch"
}
tf_id=${tf_out##*"
"}
tf_id=${tf_id%%;*}
case $tf_id in ''|*[!0-9_]*) printf 'sbatch printed no job id: %s\n' "$tf_out" >&2; exit "$tf_exit_sbatch";; esac
printf '%s\n' "$tf_id" > "$d/id" || exit "$tf_exit_jobdir"
echo "launched slurm:$tf_id"
