package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// The torch notebook of issue 28: cell 3's output and cell 4's loss are inside an autograd graph,
// which pickle cannot save; cell 5 trains through them.
var torchCells = []string{
	"import torch, torch.nn as nn, torch.optim as optim\ntorch.manual_seed(0)",
	"x = torch.tensor([[1.0, 2.0], [3.0, 4.0]]); print(x @ x.T)",
	"layer = nn.Linear(2, 1); input_data = torch.tensor([[1.0, 2.0]])\noutput = layer(input_data)",
	"target = torch.tensor([[1.0]]); loss_fn = nn.MSELoss()\nloss = loss_fn(output, target)",
	"optimizer = optim.SGD(layer.parameters(), lr=0.01)\noptimizer.zero_grad(); loss.backward(); optimizer.step()",
	"print([p.detach().tolist() for p in layer.parameters()], float(loss), output.grad_fn is not None)",
}

// runKilled runs cells in session id, killing its kernel (kill -9) after each one, so every cell
// after the first runs in a kernel restored from the checkpoint of the one before. It returns the
// last cell's stdout, or the first error.
func runKilled(t *testing.T, ts *testServer, id string, cells []string) string {
	t.Helper()
	var out *client.RunResult
	for i, code := range cells {
		out = ts.run(id, code)
		if out.Error != nil {
			return "ERROR " + out.Error.EName + ": " + out.Error.EValue
		}
		if i < len(cells)-1 {
			pid := kernelPID(t, ts, id)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30e9, "kernel_died", func() bool { return len(ts.eventTypes(id, 0, "kernel_died")) == i+1 })
		}
	}
	return out.Stdout
}

// TestReplayTorchNotebookKilledAfterEveryCell: with the kernel killed after every cell, the notebook
// trains exactly as one never killed (same weights, same loss), and each restore says what it
// rebuilt by replay.
func TestReplayTorchNotebookKilledAfterEveryCell(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "torch-live"})
	ts.newSession(client.CreateRequest{SessionID: "torch-killed"})
	var want string
	for _, c := range torchCells {
		want = ts.run("torch-live", c).Stdout
	}
	if !strings.Contains(want, "True") {
		t.Fatalf("live run: %q", want)
	}
	if got := runKilled(t, ts, "torch-killed", torchCells); got != want {
		t.Fatalf("killed after every cell: %q, never killed: %q", got, want)
	}
	recomputed := map[string]bool{}
	for _, e := range ts.events("torch-killed", 0, 200, "checkpoint_restored") {
		var p struct {
			Recomputed  []struct{ Name string } `json:"recomputed"`
			NotReplayed []struct{ Name, Reason string }
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Recomputed {
			recomputed[r.Name] = true
		}
	}
	if !recomputed["output"] || !recomputed["loss"] {
		t.Fatalf("checkpoint_restored events do not name output and loss as recomputed: %v", recomputed)
	}
}

// TestReplayOffLosesTheGraph: the same notebook with persistence.replay off stops at cell 4 (the
// test above fails the same way if replay rebuilds nothing).
func TestReplayOffLosesTheGraph(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Persistence.Replay = false })
	ts.newSession(client.CreateRequest{SessionID: "torch-noreplay"})
	got := runKilled(t, ts, "torch-noreplay", torchCells[:4])
	if !strings.HasPrefix(got, "ERROR NameError") {
		t.Fatalf("without replay cell 4 should fail with NameError: %q", got)
	}
}

// TestReplayOnForkAndCheckpointRestore: a generator advanced over turns comes back, where it was,
// in a fork and after a restore of an earlier checkpoint, through the same replay.
func TestReplayOnForkAndCheckpointRestore(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "gen"})
	for _, c := range []string{"gen = (i * i for i in range(10))", "a = next(gen)", "b = next(gen)"} {
		ts.run("gen", c)
	}
	cps := must(t, 200, "checkpoints", func(ctx context.Context) ([]client.CheckpointInfo, error) {
		return ts.c.Checkpoints(ctx, "gen")
	})
	ts.run("gen", "c = next(gen)")
	fork := must(t, 201, "fork", func(ctx context.Context) (*client.Session, error) {
		return ts.c.Fork(ctx, "gen", client.ForkRequest{SessionID: "gen-fork"})
	})
	if out := ts.run(fork.ID, "(next(gen), a, b, c)"); resultOf(out) != "(9, 0, 1, 4)" || !recomputedGen(out) {
		t.Fatalf("fork: %s", dump(out))
	}
	// The checkpoint after b = next(gen): the generator comes back having yielded 0 and 1.
	res := must(t, 200, "restore", func(ctx context.Context) (*client.RestoreResult, error) {
		_, r, err := ts.c.RestoreCheckpoint(ctx, "gen", cps[0].ID)
		return r, err
	})
	if len(res.Recomputed) != 1 || res.Recomputed[0].Name != "gen" {
		t.Fatalf("restore answer does not name gen as recomputed: %s", dump(res))
	}
	// The run after the restore says it too (told once).
	if out := ts.run("gen", "(next(gen), 'c' in dir())"); resultOf(out) != "(4, False)" || !recomputedGen(out) ||
		out.Restore.CheckpointID != cps[0].ID {
		t.Fatalf("checkpoint restore: %s", dump(out))
	}
	if out := ts.run("gen", "1"); out.Restore != nil {
		t.Fatalf("told twice: %s", dump(out))
	}
}

// recomputedGen: a run's answer reports a restore that rebuilt gen (bound at turn 1, advanced at 2
// and 3), checked against its fingerprint.
func recomputedGen(out *client.RunResult) bool {
	if out.Restore == nil || len(out.Restore.Recomputed) != 1 {
		return false
	}
	r := out.Restore.Recomputed[0]
	return r.Name == "gen" && r.Turn == 1 && len(r.Turns) >= 3 && r.Verified == "type, code, finished, at, locals"
}

// TestReplayReportInTheNextRun: the run after a kill -9 of the kernel (its kernel restored from the
// last checkpoint) says in its answer what the restore rebuilt, each value checked against its saved
// fingerprint, naming turns as the session numbers them; the run after that says nothing of it.
func TestReplayReportInTheNextRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "torch-report"})
	// Turn 1 dies with its kernel: no checkpoint has it, the next kernel's history starts at turn 2.
	_, err := ts.c.Run(context.Background(), "torch-report", client.RunRequest{Code: "import os\nos.kill(os.getpid(), 9)"})
	errCode(t, err, 502, "kernel_died")
	for _, c := range torchCells[:4] {
		if out := ts.run("torch-report", c); out.Error != nil {
			t.Fatalf("%q: %s", c, dump(out))
		}
	}
	if err := syscall.Kill(kernelPID(t, ts, "torch-report"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30e9, "kernel_died", func() bool { return len(ts.eventTypes("torch-report", 0, "kernel_died")) == 2 })
	out := ts.run("torch-report", torchCells[4])
	if out.Error != nil || out.Restore == nil {
		t.Fatalf("the run after the kill: %s", dump(out))
	}
	got := map[string]client.Recomputed{}
	for _, r := range out.Restore.Recomputed {
		got[r.Name] = r
	}
	for name, turn := range map[string]int{"output": 4, "loss": 5} {
		r, ok := got[name]
		if !ok || r.Turn != turn || r.Verified != "type, shape, dtype, requires_grad, grad_fn, data" {
			t.Errorf("%s: %+v, want turn %d verified against its fingerprint (answer %s)", name, r, turn, dump(out.Restore))
		}
	}
	if len(out.Restore.NotReplayed) != 0 || out.Restore.CheckpointID == "" {
		t.Errorf("restore report: %s", dump(out.Restore))
	}
	if again := ts.run("torch-report", torchCells[5]); again.Restore != nil || again.Error != nil {
		t.Fatalf("told twice: %s", dump(again))
	}
}
