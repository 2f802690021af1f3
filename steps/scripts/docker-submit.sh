# shellcheck shell=sh
# docker-submit: launches a job's container unless one exists: by name,
# else by the label tao-job=<job> (a container renamed since). A container
# that failed to start (docker run's 125, 126, 127) is removed, so that a
# retry launches again instead of adopting it.
# Parameters: tf_jobs (the jobs directory under $HOME, where the cancel
# marker lives), tf_job (the job id, the container's name), tf_label_job
# (the label key tao-job), tf_head (docker run's options before the
# volumes), tf_vols (the -v values, HOST:CONTAINER[:OPTS], a HOST of ~ or
# ~/… read as $HOME), tf_rest (the options after them and the image): the
# three are lists of shell words (eval set --); tf_argv (the container's
# command: shell text that this shell splits into words, with globbing
# off, and nothing else: plan.CheckContainerArgv refused the rest);
# tf_exit_nodaemon.
# Needs docker-check. Prints "launched ID" or "adopted ID".
tf_nl='
'
j=$tf_job
m=$HOME/$tf_jobs/$j
if id=$(docker inspect --type container --format '{{.Id}}' "$j" 2>/dev/null); then echo "adopted $id"; exit 0; fi
id=$(docker ps -a -q --no-trunc --filter "label=$tf_label_job=$j") || { echo 'cannot list the containers (is the docker daemon running?)' >&2; exit "$tf_exit_nodaemon"; }
if [ -n "$id" ]; then echo "adopted ${id%%"$tf_nl"*}"; exit 0; fi
rm -f "$m/canceled" "$m"/docker.*
eval "set -- $tf_vols"
tf_n=$#
while [ "$tf_n" -gt 0 ]; do
	v=$1
	shift
	tf_n=$((tf_n - 1))
	# shellcheck disable=SC2088 # a literal ~ is matched, on purpose
	case $v in '~:'*|'~/'*:*) v=$HOME${v#'~'};; esac
	# A host directory is made by the user, not by the daemon as root.
	case $v in /*:*) h=${v%%:*}; [ -e "$h" ] || mkdir -p "$h" 2>/dev/null;; esac
	set -- "$@" -v "$v"
done
set -f
eval "set -- $tf_head \"\$@\" $tf_rest $tf_argv"
id=$(docker run "$@")
rc=$?
if [ "$rc" -ne 0 ]; then
	[ "$(docker inspect --type container --format '{{.State.Status}}' "$j" 2>/dev/null)" = created ] && docker rm -f "$j" >/dev/null 2>&1
	exit "$rc"
fi
echo "launched $id"
