//go:build race

package main

// raceEnabled says the test binary runs under the race detector, whose
// shadow memory multiplies a process's peak RSS.
const raceEnabled = true
