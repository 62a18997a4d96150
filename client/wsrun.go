package client

import (
	"context"
)

// Run runs code over the websocket and waits for the turn to end; see RunFrame.
func (c *Conn) Run(ctx context.Context, id, code string) (*RunResult, []Frame, error) {
	return c.RunFrame(ctx, RunFrame{ID: id, Code: code})
}

// RunFrame sends a run and collects its frames (status, output, input_request, and any notice of
// dropped frames) until its result and the idle status that follows (the turn, checkpoint
// included, is over), or until an error frame for it. Frames of other runs and events are kept
// for the next calls of Next. An empty ID gets a generated one.
//
// It returns the run answer, the collected frames (result and idle included), and an *Error
// (Status 0) for an error frame. The server sends a timeout's or kernel death's error frame after
// the result and idle; so when a result is not "ok", RunFrame makes a Ping round trip to see
// whether an error for the run follows, and then returns the result and that error together.
//
// A run that calls input() waits for an InputReply: send one from another goroutine when an
// input_request frame is seen, or use Next directly.
func (c *Conn) RunFrame(ctx context.Context, rf RunFrame) (*RunResult, []Frame, error) {
	if rf.ID == "" {
		rf.ID = newFrameID()
	}
	if err := c.Send(ctx, rf); err != nil {
		return nil, nil, err
	}
	var (
		res    *RunResult
		frames []Frame
		other  []Frame
	)
	defer func() { c.backlog = append(other, c.backlog...) }()
	for {
		f, err := c.Next(ctx)
		if err != nil {
			return res, frames, err
		}
		if f.ID != rf.ID && f.Type != FrameNotice {
			other = append(other, f)
			continue
		}
		frames = append(frames, f)
		switch {
		case f.Type == FrameError && f.Error != nil:
			return res, frames, f.Error.Err()
		case f.Type == FrameResult:
			res = f.Result
		case f.Type == FrameStatus && f.ExecutionState == "idle" && res != nil:
			if res.Status == StatusOK {
				return res, frames, nil
			}
			err := c.trailingError(ctx, rf.ID, &frames, &other)
			return res, frames, err
		}
	}
}

// trailingError pings and reads up to the pong: an error frame for run id on the way is that
// run's error (timeout, kernel_died), which the server sends after the result and idle.
func (c *Conn) trailingError(ctx context.Context, id string, frames, other *[]Frame) error {
	ping := Ping{ID: "after-" + id}
	if err := c.Send(ctx, ping); err != nil {
		return err
	}
	var runErr error
	for {
		f, err := c.Next(ctx)
		switch {
		case err != nil:
			return err
		case f.Type == FramePong && f.ID == ping.ID:
			return runErr
		case f.ID == id && f.Type == FrameError && f.Error != nil:
			*frames = append(*frames, f)
			runErr = f.Error.Err()
		default:
			*other = append(*other, f)
		}
	}
}
