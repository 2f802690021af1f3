# shellcheck shell=sh
# send: extracts the tar archive on stdin, whose one top-level entry is
# "d", into a fresh temporary directory next to $dst, checks that it holds
# $want_files regular files of $want_bytes bytes and $want_links symlinks,
# and only then renames it to $dst (what $dst held before is removed). A
# failure, or a signal, leaves $dst as it was and removes the temporary
# directory (a SIGKILL leaves it, named .taoflow-send.*, never $dst).
# Prints "@got FILES BYTES LINKS" when the counts differ.
# Parameters: dst (a leading ~ expanded to $HOME), want_files, want_bytes,
# want_links.
case $dst in
\~) dst=$HOME ;;
\~/*) dst=$HOME/${dst#\~/} ;;
esac
dst=${dst%/}
[ -n "$dst" ] || { echo "the destination names no path" >&2; exit 84; }
parent=$(dirname -- "$dst")
mkdir -p -- "$parent" || { echo "cannot create the directory $parent" >&2; exit 84; }
tmp=$(mktemp -d "$parent/.taoflow-send.XXXXXX") || { echo "cannot write in $parent" >&2; exit 84; }
trap 'rm -rf -- "$tmp"' EXIT
trap 'exit 130' INT TERM HUP PIPE
tar -x -f - -C "$tmp" --no-same-owner || exit 85
[ -e "$tmp/d" ] || { echo "the archive was empty" >&2; exit 85; }
got=$(find "$tmp/d" \( -type f -o -type l \) -printf '%y %s\n' | awk '$1 == "f" { n++; b += $2 } $1 == "l" { l++ } END { printf "%.0f %.0f %.0f\n", n, b, l }') || exit 85
if [ "$got" != "$want_files $want_bytes $want_links" ]; then
	echo "@got $got"
	exit 86
fi
if [ -e "$dst" ] || [ -L "$dst" ]; then
	mv -- "$dst" "$tmp/old" || { echo "cannot replace $dst" >&2; exit 87; }
fi
if ! mv -- "$tmp/d" "$dst"; then
	[ ! -e "$tmp/old" ] || mv -- "$tmp/old" "$dst"
	echo "cannot rename the copy to $dst" >&2
	exit 87
fi
