# shellcheck shell=sh
# pull: pulls an image unless the instance has it, then prints its repo
# digests and id as "@digest REPO@sha256:..." and "@id sha256:..." lines
# ("@present" first when it was there). docker pull's own output goes to
# stdout too, for the node log.
# Parameters: tf_image.
# Needs docker-check.
if docker image inspect "$tf_image" > /dev/null 2>&1; then
	echo "@present"
else
	docker pull "$tf_image" || exit
fi
docker image inspect --format '{{range .RepoDigests}}{{println "@digest" .}}{{end}}@id {{.Id}}' "$tf_image"
