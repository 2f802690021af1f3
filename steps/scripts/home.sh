# shellcheck shell=sh
# home: paths on the instance as the plan writes them.
# Parameters: none.
#
# tf_home P: sets tf_h to P with a leading ~ or ~/ read as $HOME (never
# eval'd: ~user is left as it is).
#
# The patterns match a literal ~ (quoted on purpose: SC2088), and tf_h is
# for the callers (SC2034).
# shellcheck disable=SC2088,SC2034
tf_home() {
	case $1 in
	'~') tf_h=$HOME ;;
	'~/'*) tf_h=$HOME/${1#'~/'} ;;
	*) tf_h=$1 ;;
	esac
}
