# shellcheck shell=sh
# hash: prints "SHA256  ./PATH" for every regular file under a directory
# (symbolic links are neither followed nor hashed, as uploads copy no link
# targets), the manifest at the top left out; it prints nothing where
# sha256sum is missing.
# Parameters: tf_src (may start with ~/), tf_manifest, tf_exit_nosource.
# Needs home.
tf_home "$tf_src"
src=$tf_h
[ -d "$src" ] || exit "$tf_exit_nosource"
command -v sha256sum >/dev/null 2>&1 || exit 0
cd "$src" && find . -type f ! -path "./$tf_manifest" -print0 | xargs -0r sha256sum
