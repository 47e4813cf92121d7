// Package llamatest holds the tests of package dialogue that need real llama.cpp models:
// context fitting with the stories260K and 32k-vocabulary tokenizers, and the
// summariser and KV-state plumbing with stories260K. They link libllama through
// engines/llama, so they run where the native libraries are:
//
//	scripts/env go test ./internal/llamatest
//
// Package dialogue itself is pure Go and never imports engines/llama, and `go vet` of
// ./dialogue/... vets test files too: keeping these tests outside dialogue/ keeps it
// buildable and vettable without the native libraries.
package llamatest
