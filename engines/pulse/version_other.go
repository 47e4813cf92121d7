//go:build !linux

package pulse

// LibraryVersion returns "" outside Linux, where Parley links no libpulse.
func LibraryVersion() string { return "" }
