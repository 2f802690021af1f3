# shellcheck shell=sh
# slurm-resubmit: on a wait's retry, queues a job again when Slurm ended
# its last one NODE_FAIL, BOOT_FAIL or PREEMPTED (its node failed or it
# was preempted: not the job's fault). The new sbatch job has the same
# name, script (job.sh), secrets file (env) and directory; its output is
# appended to the log (the options hold --open-mode=append), and its id
# replaces the old one in DIR/id. Any other job, or one squeue no longer
# lists, is left as it is.
# Parameters: tf_dir (the job's directory; may start with ~/), tf_args (a
# list of shell words: sbatch's options, read with eval set --),
# tf_exit_sbatch (the exit code when sbatch refuses the job).
# Needs home. Prints "resubmitted slurm:OLD slurm:NEW STATE", or nothing.
tf_home "$tf_dir"
d=$tf_h
[ -s "$d/id" ] && [ -f "$d/job.sh" ] || exit 0
read -r tf_old < "$d/id"
tf_st=$(squeue --me -t all -h -j "$tf_old" -o %T 2>/dev/null)
case $tf_st in
NODE_FAIL|BOOT_FAIL|PREEMPTED) ;;
*) exit 0 ;;
esac
rm -f "$d/rc" "$d/canceled"
eval "set -- $tf_args"
tf_out=$(sbatch "$@" --output="$d/log" --chdir="$d" < "$d/job.sh" 2>&1) || {
	printf '%s\n' "$tf_out" >&2
	exit "$tf_exit_sbatch"
}
tf_id=${tf_out##*"
"}
tf_id=${tf_id%%;*}
case $tf_id in ''|*[!0-9_]*) printf 'sbatch printed no job id: %s\n' "$tf_out" >&2; exit "$tf_exit_sbatch";; esac
printf '%s\n' "$tf_id" > "$d/id" || exit "$tf_exit_sbatch"
echo "resubmitted slurm:$tf_old slurm:$tf_id $tf_st"
