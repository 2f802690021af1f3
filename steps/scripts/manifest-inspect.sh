# shellcheck shell=sh
# manifest-inspect: checks that the logged-in docker may read an image,
# without pulling it. A registry on a loopback address is reached over
# plain HTTP (--insecure), as the Docker engine allows by default.
# Parameters: tf_image, tf_insecure (1 or 0).
# Needs docker-check.
if [ "$tf_insecure" = 1 ]; then
	DOCKER_CLI_EXPERIMENTAL=enabled docker manifest inspect --insecure "$tf_image" > /dev/null
else
	DOCKER_CLI_EXPERIMENTAL=enabled docker manifest inspect "$tf_image" > /dev/null
fi
