# shellcheck shell=sh
# login: logs the instance's docker in to a registry with the secret whose
# name is tf_key, which the secret prelude has exported: printf is a shell
# builtin, so the key goes from the shell's memory into docker's stdin and
# is on no command line. The user name is a parameter, so $oauthtoken
# reaches docker as it is written.
# Parameters: tf_registry, tf_user, tf_key (the secret's name).
# Needs docker-check.
case $tf_key in ''|[0-9]*|*[!A-Za-z0-9_]*) echo "secret name $tf_key is not a variable name" >&2; exit 2;; esac
eval "tf_k=\${$tf_key-}"
printf '%s' "$tf_k" | docker login "$tf_registry" -u "$tf_user" --password-stdin
