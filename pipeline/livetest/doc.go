// Package livetest runs the agent live through a private PulseAudio server: a barge-in
// through real devices, and the echo of the agent's own voice through a loopback.
// scripts/test runs it last and alone (scripts/alone): its outcomes depend on the
// overlap module's decodes keeping pace in real time.
package livetest
