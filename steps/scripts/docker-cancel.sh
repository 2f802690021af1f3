# shellcheck shell=sh
# docker-cancel: stops the containers docker-mark listed in $live: TERM,
# then KILL after the grace (docker stop -t). They stay, so that their
# last log lines can still be read; docker-remove removes them.
# Parameters: tf_grace (whole seconds).
# Needs docker-mark.
[ -z "$live" ] && exit 0
echo "stopping container(s)$live (TERM, then KILL after ${tf_grace}s)"
# shellcheck disable=SC2086 # names are [a-zA-Z0-9_.-] words (docker-mark)
docker stop -t "$tf_grace" $live > /dev/null
