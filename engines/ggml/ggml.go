// Package ggml loads ggml's compute backends. Debian (and other distributions) ship the
// CPU backend as loadable modules, so libllama and libwhisper find no device until
// LoadBackends ran once in the process.
package ggml

/*
#cgo pkg-config: ggml
// Debian's ggml.pc names only libggml; the backend registry is in libggml-base, which
// programs linking libllama or libwhisper get from their .pc files.
#cgo LDFLAGS: -lggml-base
#include <ggml-backend.h>
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// LoadBackends loads every ggml backend found in the default places (or in the directory
// named by GGML_BACKEND_PATH's parent conventions), unless a CPU backend is already
// registered. It is safe to call any number of times.
func LoadBackends() error {
	if C.ggml_backend_dev_count() == 0 {
		C.ggml_backend_load_all()
	}
	if C.ggml_backend_dev_count() == 0 {
		return fmt.Errorf("ggml: no compute backend found (is the ggml CPU backend package installed?)")
	}
	return nil
}

// LoadBackendsFrom loads every backend found in dir.
func LoadBackendsFrom(dir string) error {
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	C.ggml_backend_load_all_from_path(cdir)
	if C.ggml_backend_dev_count() == 0 {
		return fmt.Errorf("ggml: no compute backend found in %s", dir)
	}
	return nil
}

// Device describes one compute device.
type Device struct {
	Name        string
	Description string
}

// Devices lists the devices of the loaded backends.
func Devices() []Device {
	n := int(C.ggml_backend_dev_count())
	out := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		d := C.ggml_backend_dev_get(C.size_t(i))
		out = append(out, Device{
			Name:        C.GoString(C.ggml_backend_dev_name(d)),
			Description: C.GoString(C.ggml_backend_dev_description(d)),
		})
	}
	return out
}

// Version returns the linked ggml library's version and commit.
func Version() string {
	v, commit := C.GoString(C.ggml_version()), C.GoString(C.ggml_commit())
	if commit == "" || commit == "unknown" {
		return v
	}
	return v + " (" + commit + ")"
}
