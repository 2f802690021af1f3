# shellcheck shell=sh
# salvage-check: prints "@some" when the directory $tf_src (a leading ~ or
# ~/ read as $HOME) holds at least one regular file, at any depth and not
# through symlinks, and "@none" when it holds none or is no directory: a
# salvage upload or fetch runs only when the job wrote something.
# Parameters: tf_src.
# Needs home.
tf_home "$tf_src"
if [ -d "$tf_h" ] && [ -n "$(find "$tf_h" -type f -print 2>/dev/null | head -n 1)" ]; then
	echo @some
else
	echo @none
fi
