package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/carryover/carryover/client"
)

// A session whose variables outlive each turn, and a timeout that still answers what ran.
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "my-token")
	s, err := c.CreateSession(ctx, client.CreateRequest{Name: "analysis"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Run(ctx, s.ID, client.RunRequest{Code: "total = 40"}); err != nil {
		log.Fatal(err)
	}
	res, err := c.Run(ctx, s.ID, client.RunRequest{Code: "total + 2", TimeoutSeconds: client.Seconds(5)})
	switch client.ErrorCode(err) {
	case "":
		fmt.Println(*res.Result, res.Checkpoint.Saved)
	case client.CodeTimeout:
		fmt.Println("interrupted; printed so far:", res.Stdout)
	default:
		log.Fatal(err)
	}
}

// Streaming a run over the websocket.
func ExampleConn_Run() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "my-token")
	conn, err := c.Connect(ctx, "my-session")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	res, frames, err := conn.Run(ctx, "c1", "for i in range(3): print(i)")
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range frames {
		if f.Type == client.FrameOutput {
			fmt.Print(f.Output.Text)
		}
	}
	fmt.Println(res.Status)
}
