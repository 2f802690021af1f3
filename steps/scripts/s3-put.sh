# shellcheck shell=sh
# s3-put: writes a body, carried in the script itself (stdin is for
# secrets only: brev exec has none), to an S3 object.
# Parameters: tf_body, tf_url (the object), tf_opts (a list of shell
# words, as s3-sync's).
# Needs aws-check.
eval "set -- $tf_opts"
printf '%s' "$tf_body" | aws s3 cp - "$tf_url" --content-type application/json --only-show-errors "$@"
