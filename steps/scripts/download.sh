# shellcheck shell=sh
# download: stages $src in to the directory $dst (a leading ~ expanded to
# $HOME), copying only what is missing or changed (aws s3 sync for s3://,
# cp -R -P for a directory of a shared filesystem, no link followed).
# For s3:// it prints, after a line "@@copied", what the sync printed
# (one "download: SOURCE to DEST" line per object it copied), or, with
# $list set, copies nothing and prints the source's listing
# (list-objects-v2 JSON) after a line "@@source"; for a directory, the
# source's listing ("SIZE PATH\0" records) after "@@source". Then the
# destination's listing ("SIZE PATH\0" records of regular files) after a
# line "@@dest". Exits 80 when a directory source does not exist, 83 when
# the AWS CLI is missing, 84 when $dst cannot be created.
# Parameters: src (s3://BUCKET/PREFIX/ or an absolute directory), dst,
# bucket, prefix (for the listing), endpoint, region, excludes (patterns,
# one a line), list ("" to sync, "1" to list only).
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
	if [ -n "$list" ]; then
		# Only the verification's listing, when the sync's own report
		# could not be read.
		shift "$n"
		echo "@@source"
		aws s3api list-objects-v2 --bucket "$bucket" ${prefix:+--prefix "$prefix"} --output json "$@" || { echo "listing $src failed" >&2; exit 82; }
	else
		# The sync's report of what it copied is the listing that
		# verifies it: no second AWS CLI process.
		echo "@@copied"
		aws s3 sync "$src" "$dst" --no-progress "$@" || exit
	fi
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
