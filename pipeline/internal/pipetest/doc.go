// Package pipetest holds what the pipeline's test packages share: the demo config, replays
// with a record of the IUs they check, scenario files, the sounds' measuring windows and a
// memo that gives every replay the same voicing of the agent's speech. It is for tests
// only (it reports through testing.TB).
package pipetest
