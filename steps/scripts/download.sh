# shellcheck shell=sh
# download: stages $src in to the directory $dst (a leading ~ expanded to
# $HOME), copying only what is missing or changed (aws s3 sync for s3://,
# cp -R -P for a directory of a shared filesystem, no link followed), then
# prints the source's listing after a line "@@source" (list-objects-v2
# JSON for s3://, "SIZE PATH\0" records for a directory) and the
# destination's after a line "@@dest" ("SIZE PATH\0" records of regular
# files). Exits 80 when a directory source does not exist, 83 when the
# AWS CLI is missing, 84 when $dst cannot be created.
# Parameters: src (s3://BUCKET/PREFIX/ or an absolute directory), dst,
# bucket, prefix (for the listing), endpoint, region, excludes (patterns,
# one a line).
case $dst in
\~) dst=$HOME ;;
\~/*) dst=$HOME/${dst#\~/} ;;
esac
mkdir -p -- "$dst" || { echo "cannot create the directory $dst" >&2; exit 84; }
case $src in
s3://*)
	command -v aws >/dev/null 2>&1 || { echo 'the AWS CLI (aws) is not installed on the instance' >&2; exit 83; }
	export AWS_PAGER=
	set --
	n=0
	tf_ifs=$IFS
	IFS='
'
	set -f
	for p in $excludes; do
		set -- "$@" --exclude "$p"
		n=$((n + 2))
	done
	set +f
	IFS=$tf_ifs
	[ -z "$endpoint" ] || set -- "$@" --endpoint-url "$endpoint"
	[ -z "$region" ] || set -- "$@" --region "$region"
	# The source's listing runs beside the sync (each AWS CLI call pays
	# its own start-up), into a private temporary file.
	lst=$(mktemp) || exit 84
	trap 'rm -f -- "$lst"' EXIT
	(
		shift "$n"
		exec aws s3api list-objects-v2 --bucket "$bucket" ${prefix:+--prefix "$prefix"} --output json "$@" >"$lst"
	) &
	lpid=$!
	aws s3 sync "$src" "$dst" --only-show-errors "$@" || { rc=$?; wait "$lpid"; exit "$rc"; }
	wait "$lpid" || { echo "listing $src failed" >&2; exit 82; }
	echo "@@source"
	cat -- "$lst"
	;;
*)
	[ -d "$src" ] || exit 80
	src=$(cd -- "$src" && pwd -P) || exit 80
	# cp writes through a link it copies onto: remove links in $dst where
	# the source has an entry first.
	(cd -- "$dst" && find . -type l -exec sh -c 'for l; do if [ -e "$0/$l" ] || [ -L "$0/$l" ]; then rm -f "$l" || exit 1; fi; done' "$src" {} +) || exit 81
	cp -R -P -- "$src"/. "$dst"/ || exit 81
	echo "@@source"
	(cd -- "$src" && find . -type f -printf '%s %P\0') || exit 82
	;;
esac
echo
echo "@@dest"
cd -- "$dst" && find . -type f -printf '%s %P\0'
