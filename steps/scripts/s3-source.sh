# shellcheck shell=sh
# s3-source: lists the regular files under a directory (not through
# symlinks, which aws s3 sync --no-follow-symlinks skips) as
# "SIZE PATH\0" records.
# Parameters: tf_src (may start with ~/), tf_exit_nosource.
# Needs home.
tf_home "$tf_src"
src=$tf_h
[ -d "$src" ] || exit "$tf_exit_nosource"
cd "$src" && find . -type f -printf '%s %P\0'
