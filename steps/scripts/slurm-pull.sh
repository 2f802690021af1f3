# shellcheck shell=sh
# slurm-pull: imports an image with enroot on the login node into a
# squashfs file in the run's directory (on the shared filesystem), unless
# that file is there already; a container job of the run then runs that
# file (slurm-job.sh: srun --container-image=FILE) instead of pulling the
# image when it starts. The import goes to FILE.PID.part first (two pools
# may import at once), so a failed or killed one never leaves a partial
# FILE.
# Parameters: tf_uri (enroot's docker://[REGISTRY#]IMAGE[:TAG]), tf_sqsh
# (the file; may start with ~/), tf_exit_noenroot (the exit code when the
# login node has no enroot).
# Needs home. Prints "@present" when the file was there; enroot's own
# output goes to stdout too, for the node log.
if ! command -v enroot > /dev/null 2>&1; then
	echo "enroot is not installed where Slurm's commands run" >&2
	exit "$tf_exit_noenroot"
fi
tf_home "$tf_sqsh"
f=$tf_h
if [ -s "$f" ]; then
	echo "@present"
	exit 0
fi
mkdir -p "${f%/*}" || exit
tf_p=$f.$$.part
enroot import -o "$tf_p" "$tf_uri" 2>&1 || { tf_rc=$?; rm -f "$tf_p"; exit "$tf_rc"; }
mv -f "$tf_p" "$f"
