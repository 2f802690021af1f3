# shellcheck shell=sh
# manifest-write: writes a body (carried in the script: stdin is for
# secrets only) to a directory's manifest through a temporary file of an
# unpredictable name (mktemp) in that directory, renamed over the
# manifest: a symlink planted at a fixed name is never written through,
# and rename replaces a link instead of following it.
# Parameters: tf_dest (the directory), tf_name (the manifest's name),
# tf_body.
t=$(mktemp "$tf_dest/.$tf_name.XXXXXX") || exit 1
if ! { printf '%s' "$tf_body" > "$t" && mv -f "$t" "$tf_dest/$tf_name"; }; then
	rm -f "$t"
	exit 1
fi
