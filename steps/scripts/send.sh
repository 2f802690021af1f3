# shellcheck shell=sh
# send: extracts the tar archive on stdin, whose one top-level entry is
# "d", into a fresh temporary directory next to $dst, checks that it holds
# $want_files regular files of $want_bytes bytes and $want_links symlinks,
# and only then renames it to $dst (what $dst held before is removed). A
# failure, or a signal, leaves $dst as it was and removes the temporary
# directory (a SIGKILL leaves it, named .taoflow-send.*, never $dst).
# Prints "@got FILES BYTES LINKS" when the counts differ. When $dst
# already lists as the tree sent (the sha256 of its sorted listing is
# $want_digest; see tree.digest), it prints "@same" and exits 0 without
# reading stdin: one session decides and sends.
# Parameters: dst (a leading ~ expanded to $HOME), want_files, want_bytes,
# want_links, want_digest.
case $dst in
\~) dst=$HOME ;;
\~/*) dst=$HOME/${dst#\~/} ;;
esac
dst=${dst%/}
[ -n "$dst" ] || { echo "the destination names no path" >&2; exit 84; }
if [ -e "$dst" ] || [ -L "$dst" ]; then
	# Fractions of a second dropped from file times; links' times and
	# directories' sizes and times left out, as tree.same compares.
	sum=$(find -H "$dst" \( -type d -printf 'd %P\0' \) -o \( -type f -printf 'f %s %T@ %P\0' \) -o \( -type l -printf 'l %s %P\0' \) |
		sed -z 's/^\(f [0-9]* -\{0,1\}[0-9]*\)\.[0-9]*/\1/' | LC_ALL=C sort -z | sha256sum) || sum=
	if [ "${sum%% *}" = "$want_digest" ]; then
		echo "@same"
		exit 0
	fi
fi
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
