# shellcheck shell=sh
# proc-cancel: stops host-process jobs (TERM to each group, KILL after
# $tf_limit tenths of a second) and marks them canceled by taoflow.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_ids (a list of
# shell words, the job ids, read with eval set --).
# Needs procfuncs.
eval "set -- $tf_ids"
for tf_id in "$@"; do tf_term "$HOME/$tf_jobs/$tf_id"; done
tf_reap
