package jupyter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// The frames below are built as jupyter_server's connection/base.py builds them
// (serialize_msg_to_ws_v1, serialize_binary_message), independently of encodeV1/encodeLegacy.

func pyV1(channel string, parts ...[]byte) []byte {
	offsets := []uint64{uint64(8 * (1 + 1 + len(parts) + 1))}
	offsets = append(offsets, offsets[0]+uint64(len(channel)))
	for _, p := range parts {
		offsets = append(offsets, offsets[len(offsets)-1]+uint64(len(p)))
	}
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(offsets)))
	for _, o := range offsets {
		_ = binary.Write(&b, binary.LittleEndian, o)
	}
	b.WriteString(channel)
	for _, p := range parts {
		b.Write(p)
	}
	return b.Bytes()
}

func pyLegacyBinary(js []byte, buffers ...[]byte) []byte {
	bufs := append([][]byte{js}, buffers...)
	offsets := []uint32{uint32(4 * (len(bufs) + 1))}
	for _, x := range bufs[:len(bufs)-1] {
		offsets = append(offsets, offsets[len(offsets)-1]+uint32(len(x)))
	}
	var b bytes.Buffer
	_ = binary.Write(&b, binary.BigEndian, uint32(len(bufs)))
	for _, o := range offsets {
		_ = binary.Write(&b, binary.BigEndian, o)
	}
	for _, x := range bufs {
		b.Write(x)
	}
	return b.Bytes()
}

func TestV1RoundTrip(t *testing.T) {
	hdr := []byte(`{"msg_id":"a","msg_type":"comm_msg","date":1700000000.5}`)
	frame := pyV1("shell", hdr, []byte(`{}`), []byte(`{}`), []byte(`{"data":{}}`), []byte{1, 2, 3}, []byte{})
	m, err := decodeV1(frame)
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "shell" || string(m.Header) != string(hdr) || string(m.Content) != `{"data":{}}` || len(m.Buffers) != 2 || !bytes.Equal(m.Buffers[0], []byte{1, 2, 3}) {
		t.Fatalf("decoded %+v", m)
	}
	if again := encodeV1(m); !bytes.Equal(again, frame) {
		t.Fatalf("re-encoded frame differs from jupyter_server's:\n%v\n%v", again, frame)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, frame[:20], append([]byte{255, 0, 0, 0, 0, 0, 0, 0}, frame[8:]...)} {
		if _, err := decodeV1(bad); err == nil {
			t.Fatalf("a malformed v1 frame was accepted: %v", bad)
		}
	}
}

func TestLegacyFrames(t *testing.T) {
	m := kernel.RawMessage{Channel: "iopub", Header: json.RawMessage(`{"msg_id":"m1","msg_type":"comm_msg"}`),
		ParentHeader: json.RawMessage(`{"msg_id":"p"}`), Content: json.RawMessage(`{"x":1}`)}
	bin, text := encodeLegacy(m)
	var got map[string]any
	if bin || json.Unmarshal(text, &got) != nil || got["msg_id"] != "m1" || got["msg_type"] != "comm_msg" || got["channel"] != "iopub" {
		t.Fatalf("legacy text frame: %s", text)
	}
	m.Buffers = [][]byte{{9, 8}, {7}}
	bin, frame := encodeLegacy(m)
	if !bin {
		t.Fatal("a message with buffers must be a binary frame")
	}
	_, js := encodeLegacy(kernel.RawMessage{Channel: m.Channel, Header: m.Header, ParentHeader: m.ParentHeader, Content: m.Content})
	if want := pyLegacyBinary(js, []byte{9, 8}, []byte{7}); !bytes.Equal(frame, want) {
		t.Fatalf("legacy binary frame differs from jupyter_server's:\n%v\n%v", frame, want)
	}
	back, err := decodeLegacyBinary(frame)
	if err != nil || back.Channel != "iopub" || len(back.Buffers) != 2 || !bytes.Equal(back.Buffers[1], []byte{7}) {
		t.Fatalf("decoded %+v %v", back, err)
	}
	if _, err := decodeLegacyBinary([]byte{0, 0, 0, 9, 0}); err == nil {
		t.Fatal("a malformed binary frame was accepted")
	}
}
