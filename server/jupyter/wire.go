package jupyter

// wire.go: the two framings of Jupyter's kernel websocket (jupyter_server
// services/kernels/connection/base.py). v1.kernel.websocket.jupyter.org is binary: a little-endian
// uint64 count n, n uint64 offsets, then the channel name, header, parent_header, metadata, content
// and buffers at those offsets. The legacy framing is a JSON text frame with a "channel" key, or,
// for messages with buffers, a binary frame: a big-endian uint32 count, that many uint32 offsets, the
// JSON, then the buffers. Headers stay raw JSON throughout (clients send dates as strings or numbers).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover/kernel"
)

// subprotocolV1 is the binary framing's websocket subprotocol.
const subprotocolV1 = "v1.kernel.websocket.jupyter.org"

var emptyObject = json.RawMessage(`{}`)

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return emptyObject
	}
	return b
}

// decodeV1 reads a v1 binary frame.
func decodeV1(b []byte) (kernel.RawMessage, error) {
	var m kernel.RawMessage
	if len(b) < 8 {
		return m, fmt.Errorf("v1 frame of %d bytes is too short", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n < 6 || n > uint64(len(b)/8) {
		return m, fmt.Errorf("v1 frame has %d offsets", n)
	}
	offs := make([]int, n)
	for i := range offs {
		o := binary.LittleEndian.Uint64(b[8*(i+1):])
		if o > uint64(len(b)) || (i > 0 && int(o) < offs[i-1]) {
			return m, fmt.Errorf("v1 frame offset %d out of range", o)
		}
		offs[i] = int(o)
	}
	part := func(i int) []byte { return b[offs[i]:offs[i+1]] }
	m.Channel = string(part(0))
	m.Header, m.ParentHeader, m.Metadata, m.Content = part(1), part(2), part(3), part(4)
	for i := 5; i < len(offs)-1; i++ {
		m.Buffers = append(m.Buffers, part(i))
	}
	return m, nil
}

// encodeV1 writes m as a v1 binary frame.
func encodeV1(m kernel.RawMessage) []byte {
	parts := [][]byte{[]byte(m.Channel), orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)}
	parts = append(parts, m.Buffers...)
	n := len(parts) + 1
	size := 8 * (n + 1)
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, 8*(n+1), size)
	binary.LittleEndian.PutUint64(out, uint64(n))
	off := 8 * (n + 1)
	binary.LittleEndian.PutUint64(out[8:], uint64(off))
	for i, p := range parts {
		off += len(p)
		binary.LittleEndian.PutUint64(out[8*(i+2):], uint64(off))
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// legacyMsg is the legacy framing's JSON.
type legacyMsg struct {
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Channel      string          `json:"channel"`
}

// decodeLegacyText reads a legacy JSON text frame.
func decodeLegacyText(b []byte) (kernel.RawMessage, error) {
	var l legacyMsg
	if err := json.Unmarshal(b, &l); err != nil {
		return kernel.RawMessage{}, fmt.Errorf("message is not JSON: %w", err)
	}
	return kernel.RawMessage{Channel: l.Channel, Header: l.Header, ParentHeader: l.ParentHeader, Metadata: l.Metadata, Content: l.Content}, nil
}

// decodeLegacyBinary reads a legacy binary frame (a message with buffers).
func decodeLegacyBinary(b []byte) (kernel.RawMessage, error) {
	if len(b) < 4 {
		return kernel.RawMessage{}, fmt.Errorf("binary frame of %d bytes is too short", len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 1 || 4*(n+1) > len(b) {
		return kernel.RawMessage{}, fmt.Errorf("binary frame has %d buffers", n)
	}
	offs := make([]int, n+1)
	for i := 0; i < n; i++ {
		offs[i] = int(binary.BigEndian.Uint32(b[4*(i+1):]))
		if offs[i] > len(b) || (i > 0 && offs[i] < offs[i-1]) {
			return kernel.RawMessage{}, fmt.Errorf("binary frame offset %d out of range", offs[i])
		}
	}
	offs[n] = len(b)
	m, err := decodeLegacyText(b[offs[0]:offs[1]])
	if err != nil {
		return m, err
	}
	for i := 1; i < n; i++ {
		m.Buffers = append(m.Buffers, b[offs[i]:offs[i+1]])
	}
	return m, nil
}

// encodeLegacy writes m in the legacy framing: JSON text, or a binary frame when it has buffers.
// msg_id and msg_type are repeated at the top level, as Jupyter Server does.
func encodeLegacy(m kernel.RawMessage) (binaryFrame bool, data []byte) {
	var h struct {
		MsgID   string `json:"msg_id"`
		MsgType string `json:"msg_type"`
	}
	_ = json.Unmarshal(m.Header, &h)
	var buf bytes.Buffer
	buf.WriteString(`{"header":`)
	buf.Write(orEmpty(m.Header))
	buf.WriteString(`,"parent_header":`)
	buf.Write(orEmpty(m.ParentHeader))
	buf.WriteString(`,"metadata":`)
	buf.Write(orEmpty(m.Metadata))
	buf.WriteString(`,"content":`)
	buf.Write(orEmpty(m.Content))
	buf.WriteString(`,"buffers":[],"channel":`)
	ids, _ := json.Marshal([]string{m.Channel, h.MsgID, h.MsgType})
	var three [3]json.RawMessage
	_ = json.Unmarshal(ids, &three)
	buf.Write(three[0])
	buf.WriteString(`,"msg_id":`)
	buf.Write(three[1])
	buf.WriteString(`,"msg_type":`)
	buf.Write(three[2])
	buf.WriteString(`}`)
	if len(m.Buffers) == 0 {
		return false, buf.Bytes()
	}
	n := len(m.Buffers) + 1
	out := make([]byte, 4*(n+1))
	binary.BigEndian.PutUint32(out, uint32(n))
	off := 4 * (n + 1)
	binary.BigEndian.PutUint32(out[4:], uint32(off))
	off += buf.Len()
	for i, b := range m.Buffers[:len(m.Buffers)-1] {
		binary.BigEndian.PutUint32(out[4*(i+2):], uint32(off))
		off += len(b)
	}
	if len(m.Buffers) > 0 {
		binary.BigEndian.PutUint32(out[4*(len(m.Buffers)+1):], uint32(off))
	}
	out = append(out, buf.Bytes()...)
	for _, b := range m.Buffers {
		out = append(out, b...)
	}
	return true, out
}
