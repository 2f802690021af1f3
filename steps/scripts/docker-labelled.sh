# shellcheck shell=sh
# docker-labelled: lists the containers that carry a label, in a format.
# Parameters: tf_label (the label key, or KEY=VALUE), tf_format (docker
# ps's --format), tf_quiet (1: an instance without docker has none, exit
# 0; else docker-check has run).
[ "$tf_quiet" = 1 ] && { command -v docker >/dev/null 2>&1 || exit 0; }
docker ps -a --filter "label=$tf_label" --format "$tf_format"
