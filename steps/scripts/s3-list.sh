# shellcheck shell=sh
# s3-list: lists the objects under an S3 prefix as list-objects-v2 JSON.
# Parameters: tf_bucket, tf_prefix ("" for the whole bucket), tf_opts (a
# list of shell words, as s3-sync's).
# Needs aws-check.
eval "set -- $tf_opts"
if [ -n "$tf_prefix" ]; then
	aws s3api list-objects-v2 --bucket "$tf_bucket" --prefix "$tf_prefix" --output json "$@"
else
	aws s3api list-objects-v2 --bucket "$tf_bucket" --output json "$@"
fi
