# shellcheck shell=sh
# docker-mark: marks the containers among tf_ids that still run as
# canceled by taoflow (a marker file canceled in the job's directory) and
# lists them in $live.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_ids (a list of
# shell words, the container names, read with eval set --).
# Needs docker-check.
eval "set -- $tf_ids"
s=$(docker inspect --type container --format '{{.Name}} {{.State.Status}}' "$@" 2>/dev/null)
live=
while read -r n st; do
	n=${n#/}
	case $n in ''|*[!a-zA-Z0-9_.-]*) continue;; esac
	case $st in running|paused|restarting|created) ;; *) continue;; esac
	mkdir -p "$HOME/$tf_jobs/$n" && : > "$HOME/$tf_jobs/$n/canceled"
	live="$live $n"
done <<EOF2
$s
EOF2
