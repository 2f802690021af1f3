# shellcheck shell=sh
# slurm-job: the batch script of a taoflow job (sent to sbatch on stdin;
# slurmctld keeps it, so it holds no secret).
# It starts in the job's directory (sbatch --chdir).
# Parameters: tf_workdir (the
# working directory; "" is $HOME; may start with ~/), tf_srun (a list of
# shell words: the srun command that runs the command in a container, ""
# for a host process, read with eval set --).
# Needs home.
#
# It exports the secrets of DIR/env (NAME=VALUE lines), runs DIR/cmd.sh
# (or srun with the container's arguments) in the working directory, and
# writes its exit code to DIR/rc in one write.
tf_d=$PWD
if [ -f "$tf_d/env" ]; then
	while IFS= read -r tf_l; do export "${tf_l?}"; done < "$tf_d/env"
	unset tf_l
fi
if [ -n "$tf_workdir" ]; then tf_home "$tf_workdir"; else tf_h=$HOME; fi
cd "$tf_h" || { echo "taoflow: working directory $tf_h does not exist on $(hostname)" >&2; echo 91 > "$tf_d/rc"; exit 91; }
if [ -n "$tf_srun" ]; then
	eval "set -- $tf_srun"
	"$@"
else
	sh "$tf_d/cmd.sh"
fi
tf_rc=$?
echo "$tf_rc" > "$tf_d/rc"
exit "$tf_rc"
