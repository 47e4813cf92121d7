package pulse

/*
#cgo pkg-config: libpulse
#include <pulse/version.h>
*/
import "C"

// LibraryVersion returns the linked libpulse's version.
func LibraryVersion() string { return C.GoString(C.pa_get_library_version()) }
