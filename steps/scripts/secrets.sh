# shellcheck shell=sh
# secrets: reads the named secrets from stdin, one line each, in order,
# and exports them for this one command: the values are never part of a
# script or an argv, here or on the instance (export is a builtin).
# Parameters: tf_secrets (a list of shell words, the secrets' names, read
# with eval set --), tf_exit_nosecret (the exit code when stdin ends
# first).
eval "set -- $tf_secrets"
for tf_n in "$@"; do
	case $tf_n in ''|[0-9]*|*[!A-Za-z0-9_]*) echo "secret name $tf_n is not a variable name" >&2; exit "$tf_exit_nosecret";; esac
	IFS= read -r tf_v || exit "$tf_exit_nosecret"
	export "$tf_n=$tf_v"
done
unset tf_v tf_n
set --
