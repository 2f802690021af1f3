# shellcheck shell=sh
# fetch: writes a tar archive of the directory $src (a leading ~ expanded
# to $HOME; symlinks archived as links, never followed) to stdout.
# Exits 80 when $src is not a directory.
# Parameters: src.
case $src in
\~) src=$HOME ;;
\~/*) src=$HOME/${src#\~/} ;;
esac
[ -d "$src" ] || exit 80
cd -- "$src" || exit 80
exec tar -c -f - .
