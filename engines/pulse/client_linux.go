package pulse

/*
#cgo pkg-config: libpulse
#include <stdint.h>
#include <stdlib.h>
#include <pulse/pulseaudio.h>

pa_operation *parley_pulse_sinks(pa_context *c, uintptr_t handle);
pa_operation *parley_pulse_sources(pa_context *c, uintptr_t handle);
pa_operation *parley_pulse_server(pa_context *c, uintptr_t handle);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// Client is a connection to a sound server. Its methods may be called from any goroutine,
// one at a time (they take turns).
type Client struct {
	mu      sync.Mutex
	ml      *C.pa_mainloop // nil once closed
	ctx     *C.pa_context
	timeout time.Duration
	server  string // for error messages
}

// Connect connects to the server opts names (by default libpulse's choice). It never
// starts a server. It fails with an error wrapping ErrNoServer when none answers within
// the timeout, and with ctx's error when ctx ends first.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.AppName == "" {
		opts.AppName = "parley"
	}
	server := opts.Server
	if server == "" {
		server = os.Getenv("PULSE_SERVER")
	}
	if server == "" {
		server = "the default server"
	}
	ml := C.pa_mainloop_new()
	if ml == nil {
		return nil, errors.New("pulse: could not create a main loop")
	}
	name := C.CString(opts.AppName)
	defer C.free(unsafe.Pointer(name))
	pctx := C.pa_context_new(C.pa_mainloop_get_api(ml), name)
	if pctx == nil {
		C.pa_mainloop_free(ml)
		return nil, errors.New("pulse: could not create a context")
	}
	c := &Client{ml: ml, ctx: pctx, timeout: opts.Timeout, server: server}
	var cserver *C.char
	if opts.Server != "" {
		cserver = C.CString(opts.Server)
		defer C.free(unsafe.Pointer(cserver))
	}
	if C.pa_context_connect(pctx, cserver, C.PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
		err := fmt.Errorf("pulse: connect to %s: %w: %s", server, ErrNoServer, c.lastError())
		c.Close()
		return nil, err
	}
	err := c.run(ctx, func() (bool, error) {
		switch C.pa_context_get_state(pctx) {
		case C.PA_CONTEXT_READY:
			return true, nil
		case C.PA_CONTEXT_FAILED, C.PA_CONTEXT_TERMINATED:
			return true, fmt.Errorf("pulse: connect to %s: %w: %s", server, ErrNoServer, c.lastError())
		}
		return false, nil
	})
	if errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("pulse: connect to %s: %w within %v", server, ErrNoServer, c.timeout)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close disconnects and frees the connection. Closing twice is harmless.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ml == nil {
		return nil
	}
	C.pa_context_disconnect(c.ctx)
	C.pa_context_unref(c.ctx)
	C.pa_mainloop_free(c.ml)
	c.ml, c.ctx = nil, nil
	return nil
}

func (c *Client) lastError() string {
	return C.GoString(C.pa_strerror(C.pa_context_errno(c.ctx)))
}

// run iterates the main loop until done reports true, the timeout passes (ErrTimeout) or
// ctx ends. A context that ends interrupts the poll at once (pa_mainloop_wakeup is the one
// libpulse call that may come from another thread).
func (c *Client) run(ctx context.Context, done func() (bool, error)) error {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ml := c.ml
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.pa_mainloop_wakeup(ml)
		close(woken)
	})
	defer func() {
		if !stop() {
			<-woken // the main loop must outlive the wake-up
		}
	}()
	for {
		if ok, err := done(); ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ErrTimeout
		}
		usec := C.int(min(left.Microseconds()+1, 1<<30))
		if C.pa_mainloop_prepare(ml, usec) < 0 || C.pa_mainloop_poll(ml) < 0 || C.pa_mainloop_dispatch(ml) < 0 {
			return fmt.Errorf("pulse: the main loop failed: %s", c.lastError())
		}
	}
}

// collector receives one query's callbacks. The callbacks run inside pa_mainloop_dispatch
// on the goroutine that called run, so it needs no locking.
type collector struct {
	devices []Device
	server  ServerInfo
}

// query starts an operation with start, passing it a handle to a collector, and runs the
// main loop until the operation is done.
func (c *Client) query(ctx context.Context, what string, start func(*C.pa_context, C.uintptr_t) *C.pa_operation) (*collector, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ml == nil {
		return nil, ErrClosed
	}
	col := &collector{}
	h := cgo.NewHandle(col)
	defer h.Delete()
	op := start(c.ctx, C.uintptr_t(h))
	if op == nil {
		return nil, fmt.Errorf("pulse: %s: %s", what, c.lastError())
	}
	defer C.pa_operation_unref(op)
	err := c.run(ctx, func() (bool, error) {
		switch C.pa_operation_get_state(op) {
		case C.PA_OPERATION_DONE:
			return true, nil
		case C.PA_OPERATION_CANCELLED:
			return true, fmt.Errorf("the server ended the query: %s", c.lastError())
		}
		return false, nil
	})
	if err != nil {
		C.pa_operation_cancel(op) // no callback may reach the deleted handle
		return nil, fmt.Errorf("pulse: %s from %s: %w", what, c.server, err)
	}
	return col, nil
}

// ServerInfo asks the server for its name, version and defaults.
func (c *Client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	col, err := c.query(ctx, "server info", func(pc *C.pa_context, h C.uintptr_t) *C.pa_operation {
		return C.parley_pulse_server(pc, h)
	})
	if err != nil {
		return ServerInfo{}, err
	}
	return col.server, nil
}

// Sources lists the server's sources (inputs and monitors of sinks), the default one marked.
func (c *Client) Sources(ctx context.Context) ([]Device, error) {
	return c.devices(ctx, "sources", func(pc *C.pa_context, h C.uintptr_t) *C.pa_operation {
		return C.parley_pulse_sources(pc, h)
	}, func(s ServerInfo) string { return s.DefaultSource })
}

// Sinks lists the server's sinks (outputs), the default one marked.
func (c *Client) Sinks(ctx context.Context) ([]Device, error) {
	return c.devices(ctx, "sinks", func(pc *C.pa_context, h C.uintptr_t) *C.pa_operation {
		return C.parley_pulse_sinks(pc, h)
	}, func(s ServerInfo) string { return s.DefaultSink })
}

func (c *Client) devices(ctx context.Context, what string, start func(*C.pa_context, C.uintptr_t) *C.pa_operation, def func(ServerInfo) string) ([]Device, error) {
	info, err := c.ServerInfo(ctx)
	if err != nil {
		return nil, err
	}
	col, err := c.query(ctx, "list "+what, start)
	if err != nil {
		return nil, err
	}
	name := def(info)
	for i := range col.devices {
		col.devices[i].Default = col.devices[i].Name == name
	}
	return col.devices, nil
}

func sampleSpec(s C.pa_sample_spec) SampleSpec {
	return SampleSpec{
		Format:   C.GoString(C.pa_sample_format_to_string(s.format)),
		Rate:     int(s.rate),
		Channels: int(s.channels),
	}
}

//export parleyPulseSink
func parleyPulseSink(h C.uintptr_t, i *C.pa_sink_info, eol C.int) {
	if eol != 0 || i == nil {
		return
	}
	col := cgo.Handle(h).Value().(*collector)
	col.devices = append(col.devices, Device{
		Index:       int(i.index),
		Name:        C.GoString(i.name),
		Description: C.GoString(i.description),
		SampleSpec:  sampleSpec(i.sample_spec),
	})
}

//export parleyPulseSource
func parleyPulseSource(h C.uintptr_t, i *C.pa_source_info, eol C.int) {
	if eol != 0 || i == nil {
		return
	}
	col := cgo.Handle(h).Value().(*collector)
	d := Device{
		Index:       int(i.index),
		Name:        C.GoString(i.name),
		Description: C.GoString(i.description),
		SampleSpec:  sampleSpec(i.sample_spec),
	}
	if i.monitor_of_sink_name != nil {
		d.MonitorOf = C.GoString(i.monitor_of_sink_name)
	}
	col.devices = append(col.devices, d)
}

//export parleyPulseServer
func parleyPulseServer(h C.uintptr_t, i *C.pa_server_info) {
	if i == nil {
		return
	}
	col := cgo.Handle(h).Value().(*collector)
	col.server = ServerInfo{
		Name:          C.GoString(i.server_name),
		Version:       C.GoString(i.server_version),
		DefaultSink:   C.GoString(i.default_sink_name),
		DefaultSource: C.GoString(i.default_source_name),
	}
}
