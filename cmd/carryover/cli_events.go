package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// eventsPage is the largest page the API gives (GET .../events?limit=).
const eventsPage = 1000

func (c *cli) eventsCmd() *cobra.Command {
	var sid, typ string
	var after int64
	var last int
	var follow bool
	cmd := &cobra.Command{
		Use:   "events -s SESSION [--follow] [--after N] [--last N] [--type T]",
		Short: "List a session's events; with --follow, print new ones as they come until Ctrl-C",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if last > 0 {
				newest, err := c.lastEvents(cmd, sid, client.EventsQuery{After: after, Type: typ}, last, !follow)
				if err != nil || !follow {
					return err
				}
				return c.followEvents(cmd, sid, max(newest, after), typ)
			}
			if follow {
				return c.followEvents(cmd, sid, after, typ)
			}
			return c.listEvents(cmd, sid, after, typ)
		}),
	}
	sessionFlag(cmd, &sid)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing events as they come (over the websocket)")
	cmd.Flags().Int64Var(&after, "after", 0, "only events after this sequence number")
	cmd.Flags().IntVar(&last, "last", 0, "only the newest N events (with --follow: then the new ones)")
	cmd.Flags().StringVar(&typ, "type", "", "only events of this type")
	return cmd
}

// listEvents prints every stored event after `after` (page by page); --json prints them as one
// {"events": [...]} answer.
func (c *cli) listEvents(cmd *cobra.Command, sid string, after int64, typ string) error {
	all := []json.RawMessage{}
	cl := c.client()
	for {
		q := url.Values{}
		q.Set("after_sequence", strconv.FormatInt(after, 10))
		q.Set("limit", strconv.Itoa(eventsPage))
		if typ != "" {
			q.Set("event_type", typ)
		}
		var out struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := cl.Do(cmd.Context(), http.MethodGet, apiPath(sid, "events")+"?"+q.Encode(), nil, &out); err != nil {
			return err
		}
		for _, raw := range out.Events {
			var e client.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			after = e.SequenceNumber
			if c.json {
				all = append(all, raw)
			} else {
				printEvent(cmd.OutOrStdout(), &e)
			}
		}
		if len(out.Events) < eventsPage {
			break
		}
	}
	if c.json {
		return marshalJSON(cmd.OutOrStdout(), map[string]any{"events": all})
	}
	return nil
}

// lastEvents prints the newest n events that q selects, oldest of them first, paging back from the
// end of the log (GET .../events?order=desc&before_sequence=), and answers the newest one's
// sequence number (0 when there is none) for --follow to go on after. With --json they are one
// {"events": [...]} answer when whole is set, else one line each as --follow prints.
func (c *cli) lastEvents(cmd *cobra.Command, sid string, q client.EventsQuery, n int, whole bool) (int64, error) {
	var got []client.Event
	q.Newest = true
	for len(got) < n {
		q.Limit = min(n-len(got), eventsPage)
		page, err := c.client().EventsWhere(cmd.Context(), sid, q)
		if err != nil {
			return 0, err
		}
		got = append(got, page...)
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].SequenceNumber
	}
	slices.Reverse(got)
	var newest int64
	if len(got) > 0 {
		newest = got[len(got)-1].SequenceNumber
	}
	out := cmd.OutOrStdout()
	if c.json && whole {
		return newest, marshalJSON(out, map[string]any{"events": got})
	}
	for i := range got {
		if !c.json {
			printEvent(out, &got[i])
			continue
		}
		raw, err := json.Marshal(&got[i])
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(out, "%s\n", raw)
	}
	return newest, nil
}

// followEvents subscribes to the session's events over its websocket (the stored ones after
// `after` first) and prints each until the context ends (Ctrl-C), which is a success. With --json
// each event is one line of JSON.
func (c *cli) followEvents(cmd *cobra.Command, sid string, after int64, typ string) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	conn, err := c.client().Connect(ctx, sid)
	if err != nil {
		if ctxDone(ctx) {
			return nil
		}
		return err
	}
	defer conn.Close()
	if err := conn.Send(ctx, client.SubscribeEvents{AfterSequence: after}); err != nil {
		if ctxDone(ctx) {
			return nil
		}
		return err
	}
	out := cmd.OutOrStdout()
	for {
		f, err := conn.Next(ctx)
		if err != nil {
			if ctxDone(ctx) {
				return nil
			}
			return err
		}
		switch {
		case f.Type == client.FrameEvent && f.Event != nil:
			if typ != "" && f.Event.EventType != typ {
				continue
			}
			if c.json {
				raw, err := json.Marshal(f.Event)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s\n", raw)
			} else {
				printEvent(out, f.Event)
			}
		case f.Type == client.FrameError && f.ID == "" && f.Error != nil:
			return f.Error.Err()
		}
	}
}

// printEvent prints "seq  time  type  payload".
func printEvent(w io.Writer, e *client.Event) {
	var payload bytes.Buffer
	if len(e.Payload) == 0 || json.Compact(&payload, e.Payload) != nil {
		payload.Reset()
		payload.Write(e.Payload)
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", e.SequenceNumber, timeText(e.CreatedAt), e.EventType, payload.String())
}
