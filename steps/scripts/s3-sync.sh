# shellcheck shell=sh
# s3-sync: copies a directory on the instance to S3 with aws s3 sync,
# leaving out a manifest at the top of the source (the upload writes its
# own) and never following a symlink (a result link to a file outside the
# results must not upload that file).
# Parameters: tf_src (may start with ~/), tf_url (s3://bucket/prefix/),
# tf_manifest (its file name), tf_excludes (a list of shell words, the
# --exclude patterns), tf_opts (a list of shell words, options for every
# aws call: --endpoint-url, --region), tf_exit_nosource.
# Needs aws-check and home.
tf_home "$tf_src"
src=$tf_h
[ -d "$src" ] || exit "$tf_exit_nosource"
eval "set -- $tf_excludes"
tf_n=$#
while [ "$tf_n" -gt 0 ]; do
	set -- "$@" --exclude "$1"
	shift
	tf_n=$((tf_n - 1))
done
eval "set -- \"\$@\" $tf_opts"
aws s3 sync "$src" "$tf_url" --no-progress --no-follow-symlinks --exclude "$tf_manifest" "$@"
