// Package progress is a job's training progress as it travels from the
// step that reads it to the views: a Report holds the line people read
// and its Figures, the numbers machine-readable output prints.
//
// steps builds a Report from a TAO status.json line (already redacted),
// the engine carries its Figures on a node-progress Event, runner records
// them in the state, and the JSON views print them as they are: nothing
// formats figures into text to parse them back. It imports only the
// standard library, so that steps, engine and state can all use it.
package progress
