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
// It returns the run answer, the collected frames, and an *Error (Status 0) for an error frame.
// A timeout's or kernel death's error frame comes after the result and before the idle status, so
// such a run returns its partial result and its error together.
//
// A run that calls input() waits for an InputReply: send one from another goroutine when an
// input_request frame is seen, or use Next directly.
func (c *Conn) RunFrame(ctx context.Context, rf RunFrame) (*RunResult, []Frame, error) {
	if rf.ID == "" {
		rf.ID = newFrameID()
	}
	if rf.IdempotencyKey == "" {
		rf.IdempotencyKey = NewIdempotencyKey()
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
			return res, frames, nil
		}
	}
}
