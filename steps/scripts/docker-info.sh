# shellcheck shell=sh
# docker-info: checks that docker works (127: it is not installed).
# Parameters: none.
docker info > /dev/null
