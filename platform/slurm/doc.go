// Package slurm is the platform of a Slurm cluster: taoflow drives the
// cluster's scheduler (sbatch, squeue, scancel) instead of machines.
//
// An instance of a slurm plan is a pool — the shape of the jobs placed in
// it (partition, GPUs, time limit, ...) — not a machine, so the platform
// creates and deletes nothing. Every command a step runs for a pool runs
// where Slurm's client commands are: on the login node (Config.Host,
// through the ssh platform: one multiplexed connection) or, without a
// host, on this machine. The steps' slurm runtime (steps/slurm.go) builds
// the sbatch, squeue and scancel scripts; this package only carries them.
//
// On this machine, a script runs under /bin/sh in a process group of its
// own (killed when its context ends), reading the script on descriptor 3
// (platform.ScriptFD), with taoflow's environment less the plan's secrets
// (Config.Env): Slurm's clients need the user's own SLURM_CONF, PATH and
// HOME, and the run's workdir is on the cluster's shared filesystem.
package slurm
