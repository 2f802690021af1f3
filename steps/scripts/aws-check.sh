# shellcheck shell=sh
# aws-check: starts every S3 script: the AWS CLI must be there, and must
# not page its output.
# Parameters: tf_exit_noaws (the exit code when aws is missing).
command -v aws >/dev/null 2>&1 || { echo 'the AWS CLI (aws) is not installed on the instance' >&2; exit "$tf_exit_noaws"; }
export AWS_PAGER=
