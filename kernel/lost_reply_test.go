package kernel

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestInterruptAfterTheCellRan: an interrupt that lands in ipykernel's message handler after the
// cell ran, before the reply is sent (ipykernel flushes stdout there, waiting on its IO thread, then
// sleeps _execute_sleep: stretched here to hold that moment open), makes ipykernel drop the
// execute_reply ("KeyboardInterrupt caught in kernel"); the kernel goes idle. The execute must end soon after, as interrupted, and the kernel run the next
// cell: it used to wait for the reply until its caller's deadline (a run's timeout, then the
// kernel's restart).
func TestInterruptAfterTheCellRan(t *testing.T) {
	t.Parallel()
	interruptAfterTheCellRan(t, func(k *Kernel) { _ = k.Interrupt(context.Background()) })
}

// TestRawInterruptAfterTheCellRan: the same with the interrupt a Jupyter client sends itself, an
// interrupt_request on control (the door passes it through SendRaw): it was not counted, so the
// execute whose reply it made ipykernel drop waited for ever.
func TestRawInterruptAfterTheCellRan(t *testing.T) {
	t.Parallel()
	interruptAfterTheCellRan(t, func(k *Kernel) {
		_ = k.SendRaw(context.Background(), "control", RawMessage{Header: rawHeader("interrupt_request", "raw-interrupt")})
	})
}

func interruptAfterTheCellRan(t *testing.T, interrupt func(*Kernel)) {
	k := startKernel(t, testOptions(t, "ipc"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := k.Execute(ctx, "get_ipython().kernel._execute_sleep = 2", ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	var outs []Output
	busy := make(chan struct{}, 1)
	opts := ExecOptions{
		OnOutput: func(o Output) { outs = append(outs, o) },
		OnStatus: func(st string) {
			if st == "busy" {
				busy <- struct{}{}
			}
		},
	}
	go func() {
		<-busy
		time.Sleep(500 * time.Millisecond) // the cell ran; the reply waits
		interrupt(k)
	}()
	start := time.Now()
	res, err := k.Execute(ctx, "print('ran')", opts)
	if err != nil {
		t.Fatalf("execute interrupted after the cell ran: %v (after %s)", err, time.Since(start))
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the execute took %s to end after its reply was lost", d)
	}
	if res.Status != "error" || res.EName != "KeyboardInterrupt" {
		t.Fatalf("status %q ename %q, want an interrupted cell", res.Status, res.EName)
	}
	if len(outs) == 0 || !strings.Contains(outs[0].Text, "ran") {
		t.Fatalf("outputs %+v: want the cell's print", outs)
	}
	if _, err := k.Execute(ctx, "get_ipython().kernel._execute_sleep = 0.0005", ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := k.Execute(ctx, "1+1", ExecOptions{})
	if err != nil || r.Status != "ok" {
		t.Fatalf("the next cell: %+v, %v", r, err)
	}
}
