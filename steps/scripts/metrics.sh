# shellcheck shell=sh
# metrics: prints, for each status.json or *.jsonl file in a results
# directory (three levels deep at most, 20 files), "@file PATH" and its
# last tf_bytes bytes.
# Parameters: tf_results (may start with ~/), tf_bytes.
# Needs home.
tf_home "$tf_results"
r=$tf_h
[ -d "$r" ] || exit 0
find "$r" -maxdepth 3 -type f \( -name status.json -o -name '*.jsonl' \) 2>/dev/null | LC_ALL=C sort | head -n 20 | while IFS= read -r f; do
	printf '@file %s\n' "$f"
	tail -c "$tf_bytes" "$f"
	echo
done
