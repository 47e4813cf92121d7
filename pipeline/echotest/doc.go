// Package echotest tests the pipeline on a simulated laptop whose speakers reach its
// microphone: every scenario without self-interruption, the canceller's convergence
// through the pipeline's own path, and the laptop's loggers.
package echotest
