# shellcheck shell=sh
# docker-check: starts every container script: without a docker CLI the
# shell's own 127 would read as docker run's "command not found".
# Parameters: tf_exit_nodocker (the exit code when docker is missing).
command -v docker >/dev/null 2>&1 || { echo 'docker is not installed on the instance' >&2; exit "$tf_exit_nodocker"; }
