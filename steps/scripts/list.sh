# shellcheck shell=sh
# list: prints the tree at $path (a leading ~ expanded to $HOME) as NUL-ended
# records "TYPE SIZE MTIME PATH" (find's %y %s %T@ %P): the root first,
# with an empty PATH, then everything under it, never through symlinks
# (a symlinked root is followed). Exits 80 when $path does not exist.
# Parameters: path.
case $path in
\~) path=$HOME ;;
\~/*) path=$HOME/${path#\~/} ;;
esac
[ -e "$path" ] || [ -L "$path" ] || exit 80
exec find -H "$path" -printf '%y %s %T@ %P\0'
