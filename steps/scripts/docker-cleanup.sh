# shellcheck shell=sh
# docker-cleanup: stops and removes every container labelled with this
# run and this instance (exactly those values), marking those that ran as
# canceled. An instance without docker has none. With tf_remove_dirs=1 it
# removes their job directories too (copies of their logs, markers), else
# only the log copies.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_run_label and
# tf_instance_label (KEY=VALUE), tf_grace (docker stop -t, seconds),
# tf_remove_dirs (1 or 0), tf_exit_nodaemon.
command -v docker >/dev/null 2>&1 || exit 0
all=$(docker ps -a --filter "label=$tf_run_label" --filter "label=$tf_instance_label" --format '{{.Names}} {{.State}}') || { echo 'cannot list the containers (is the docker daemon running?)' >&2; exit "$tf_exit_nodaemon"; }
live=''
names=''
while read -r n st; do
	case $n in ''|*[!a-zA-Z0-9_.-]*) continue;; esac
	names="$names $n"
	case $st in running|paused|restarting)
		mkdir -p "$HOME/$tf_jobs/$n" && : > "$HOME/$tf_jobs/$n/canceled"
		live="$live $n";;
	esac
done <<EOF2
$all
EOF2
# The lists hold [a-zA-Z0-9_.-] words only (checked above).
# shellcheck disable=SC2086
if [ -n "$live" ]; then
	echo "stopping container(s)$live (TERM, then KILL after ${tf_grace}s)"
	docker stop -t "$tf_grace" $live > /dev/null
fi
[ -z "$names" ] && exit 0
# shellcheck disable=SC2086
docker rm -f -v $names > /dev/null || exit 1
for n in $names; do
	if [ "$tf_remove_dirs" = 1 ]; then
		rm -rf "${HOME:?}/$tf_jobs/$n"
	else
		rm -f "$HOME/$tf_jobs/$n"/docker.*
	fi
done
echo "removed container(s)$names"
