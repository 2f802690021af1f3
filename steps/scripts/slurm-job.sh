# shellcheck shell=sh
# slurm-job: the batch script of a taoflow job (sent to sbatch on stdin;
# slurmctld keeps it, so it holds no secret).
# It starts in the job's directory (sbatch --chdir).
# Parameters: tf_workdir (the
# working directory; "" is $HOME; may start with ~/), tf_srun (a list of
# shell words: the srun command that runs the command in a container, ""
# for a host process, read with eval set --), tf_sqsh (the squashfs file
# a pull step imports the container's image into, slurm-pull.sh; may start
# with ~/): when it exists, srun's --container-image is that file.
# Needs home.
#
# It exports the secrets of DIR/env (NAME=VALUE lines), runs DIR/cmd.sh
# (or srun with the container's arguments) in the working directory,
# writes its exit code to DIR/rc in one write, then appends "@end JOB" to
# the run's events file (DIR/../events), which taoflow's watcher follows
# to look at once instead of at its next tick (scripts/watch.sh).
tf_d=$PWD
if [ -f "$tf_d/env" ]; then
	while IFS= read -r tf_l; do export "${tf_l?}"; done < "$tf_d/env"
	unset tf_l
fi
tf_img=
if [ -n "$tf_sqsh" ]; then
	tf_home "$tf_sqsh"
	[ -f "$tf_h" ] && tf_img=$tf_h
fi
if [ -n "$tf_workdir" ]; then tf_home "$tf_workdir"; else tf_h=$HOME; fi
cd "$tf_h" || { echo "taoflow: working directory $tf_h does not exist on $(hostname)" >&2; echo 91 > "$tf_d/rc"; exit 91; }
if [ -n "$tf_srun" ]; then
	eval "set -- $tf_srun"
	if [ -n "$tf_img" ]; then
		tf_n=$#
		while [ "$tf_n" -gt 0 ]; do
			case $1 in --container-image=*) set -- "$@" "--container-image=$tf_img" ;; *) set -- "$@" "$1" ;; esac
			shift
			tf_n=$((tf_n - 1))
		done
		echo "taoflow: running the image imported into $tf_img" >&2
	fi
	"$@"
else
	sh "$tf_d/cmd.sh"
fi
tf_rc=$?
echo "$tf_rc" > "$tf_d/rc"
printf '@end %s\n' "${tf_d##*/}" >> "${tf_d%/*}/events" 2> /dev/null
exit "$tf_rc"
