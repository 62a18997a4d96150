package pgtest

import (
	"context"
	"time"

	"github.com/carryover/carryover"
)

// EventAppender is the one call of a store the failover scenarios make.
type EventAppender interface {
	AppendEvent(ctx context.Context, sessionID, eventType string, payload any) (carryover.Event, error)
}

// AppendUntil appends events to session sid until stop closes, retrying failed appends (the primary
// is gone: the pool finds the promoted replica), and returns the acknowledged ones. Each
// acknowledgement's count goes to acked when it has room. The failover test and the benchmark's
// replication section both drive it.
func AppendUntil(s EventAppender, sid string, stop <-chan struct{}, acked chan<- int) []carryover.Event {
	var out []carryover.Event
	for i := 0; ; i++ {
		select {
		case <-stop:
			return out
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		ev, err := s.AppendEvent(ctx, sid, "status", map[string]int{"i": i})
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		out = append(out, ev)
		select {
		case acked <- len(out):
		default:
		}
	}
}
