package iu

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// num is a test payload.
type num int

func (n num) Kind() string    { return "num" }
func (n num) Summary() string { return strconv.Itoa(int(n)) }

// source sends n numbered IUs (ADD+COMMIT) as fast as it can.
func source(name string, n int) Module {
	return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
		for i := 0; i < n; i++ {
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
}

// received is what a sink saw from one producer.
type received struct {
	from  string
	value int
}

// sink collects every ADD it sees and returns at the end of its input; the result is
// handed over on out when the module returns.
func sink(name string, out chan<- []received, perMessage func()) Module {
	return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
		var got []received
		defer func() { out <- got }()
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case EventInputDone:
				return nil
			case EventMessage:
				if perMessage != nil {
					perMessage()
				}
				for _, up := range ev.Message.Updates {
					if up.Type == Add {
						got = append(got, received{from: ev.Message.From, value: int(up.IU.Payload.(num))})
					}
				}
			default:
				return fmt.Errorf("unexpected event %v", ev.Kind)
			}
		}
	}}
}

// working is a module that does real work (work of real time, no virtual time) on a
// worker for every IU it receives, which posts job's value; done takes each value on the
// module's goroutine. It returns once its input ended and every job reported.
func working(name string, work time.Duration, job func(*Ports, IU) any, done func(context.Context, *Ports, any) error) Module {
	return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
		pending, inputDone := 0, false
		for !inputDone || pending > 0 {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case EventInputDone:
				inputDone = true // finish the jobs still on workers first
			case EventMessage:
				for _, up := range ev.Message.Updates {
					if up.Type != Add {
						continue
					}
					pending++
					v := job(p, up.IU)
					p.Go(func(w Worker) {
						time.Sleep(work)
						_ = w.Post(ctx, v)
					})
				}
			case EventLocal:
				pending--
				if err := done(ctx, p, ev.Local); err != nil {
					return err
				}
			}
		}
		return nil
	}}
}

// lastArrival is a module that notes in *last when its latest message came, after start,
// and returns at the end of its input.
func lastArrival(name string, start time.Time, last *time.Duration) Module {
	return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == EventInputDone {
				return err
			}
			*last = p.Now().Sub(start)
		}
	}}
}
