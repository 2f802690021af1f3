# shellcheck shell=sh
# stlines: reading the end of a TAO status.json, shared by the status
# scripts (proc-status, docker-status).
# Parameters: none. st and tf_tail are set for the callers (SC2034).
# shellcheck disable=SC2034
tf_nl='
'
# tf_sttail FILE: sets tf_tail to the end of FILE (8 KiB, whose first line
# may be cut: the reader drops lines that are not whole JSON objects) and
# st to its last line.
tf_tail=
tf_sttail() {
	tf_tail=$(tail -c 8192 "$1")
	st=${tf_tail##*"$tf_nl"}
}
# tf_stlines: prints each line of tf_tail as "@st LINE" (then clears it),
# with builtins only: the reader takes the lines after the last it saw.
tf_stlines() {
	tf_ifs=$IFS
	IFS=$tf_nl
	set -f
	for tf_l in $tf_tail; do
		printf '@st %s\n' "$tf_l"
	done
	set +f
	IFS=$tf_ifs
	tf_tail=
}
