# shellcheck shell=sh
# docker-remove: removes the containers tf_ids (and their anonymous
# volumes) and the copies of their logs; a container gone already is not
# an error.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_ids (a list of
# shell words, the container names, read with eval set --).
# Needs docker-check.
eval "set -- $tf_ids"
# rm -f of a container that is gone already fails with older CLIs. Its
# stderr is kept in a variable, not a file: a fixed name under /tmp could
# be planted by another user of the instance.
tf_err=$(docker rm -f -v "$@" 2>&1 > /dev/null)
printf '%s\n' "$tf_err" | grep -v -e '^[[:space:]]*$' -e 'No such' >&2 && rc=1 || rc=0
for n in "$@"; do rm -f "$HOME/$tf_jobs/$n"/docker.*; done
[ "$rc" -eq 0 ] && echo "removed container(s) $*"
exit "$rc"
