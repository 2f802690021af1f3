# shellcheck shell=sh
# gpus: lists the GPUs, exiting 127 when there is no nvidia-smi.
# Parameters: none.
command -v nvidia-smi > /dev/null 2>&1 || exit 127
nvidia-smi -L
