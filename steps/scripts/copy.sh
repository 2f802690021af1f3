# shellcheck shell=sh
# copy: copies a directory on the instance into a destination directory
# (a file:// upload) and prints "@src FILES BYTES" and "@dst FILES BYTES",
# counting regular files (a manifest at the top of either side is not
# counted).
#
# Symlinks are copied as links, never followed (cp -P): a result link to a
# file outside the results uploads the link, not the file. A link already
# in the destination where the source has an entry is removed first, since
# cp writes through a link it copies onto (a link left by an earlier
# upload, or planted, would let this one write anywhere).
# Parameters: tf_src (may start with ~/), tf_dst, tf_manifest (its file
# name), tf_exit_nosource, tf_exit_copy, tf_exit_list.
# Needs home.
tf_home "$tf_src"
src=$tf_h
dst=$tf_dst
[ -d "$src" ] || exit "$tf_exit_nosource"
mkdir -p "$dst" || exit "$tf_exit_copy"
src=$(cd "$src" && pwd -P) || exit "$tf_exit_copy"
# shellcheck disable=SC2016 # the inner script's own variables
(cd "$dst" && find . -type l -exec sh -c 'for l; do if [ -e "$0/$l" ] || [ -L "$0/$l" ]; then rm -f "$l" || exit 1; fi; done' "$src" {} +) || exit "$tf_exit_copy"
cp -R -P "$src"/. "$dst"/ || exit "$tf_exit_copy"
tf_count() {
	tf_l=$(cd "$1" && find . -type f ! -path "./$tf_manifest" -printf '%s\n') || return 1
	printf '%s\n' "$tf_l" | awk 'NF { n++; b += $1 } END { printf "%.0f %.0f\n", n, b }'
}
s=$(tf_count "$src") || { echo "cannot list $src" >&2; exit "$tf_exit_list"; }
d=$(tf_count "$dst") || { echo "cannot list $dst" >&2; exit "$tf_exit_list"; }
echo "@src $s"
echo "@dst $d"
