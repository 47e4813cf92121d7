//go:build !linux

package pulse

import "context"

// Client is a connection to a sound server; outside Linux there is none to make.
type Client struct{}

// Connect fails with ErrUnsupported outside Linux.
func Connect(context.Context, Options) (*Client, error) { return nil, ErrUnsupported }

// ServerInfo fails with ErrUnsupported.
func (*Client) ServerInfo(context.Context) (ServerInfo, error) { return ServerInfo{}, ErrUnsupported }

// Sources fails with ErrUnsupported.
func (*Client) Sources(context.Context) ([]Device, error) { return nil, ErrUnsupported }

// Sinks fails with ErrUnsupported.
func (*Client) Sinks(context.Context) ([]Device, error) { return nil, ErrUnsupported }

// Close does nothing.
func (*Client) Close() error { return nil }
