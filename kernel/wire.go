package kernel

// wire.go keeps everything about the Jupyter wire protocol v5.3 in one place, like jupyter_client's
// session.py: header construction, HMAC-SHA256 signing and verification, and (de)serialization of
// the multipart frames
//
//	[routing ids...] "<IDS|MSG>" signature header parent_header metadata content [buffers...]
//
// Content stays raw JSON here; the callers decode only the message types they care about, so a 50 MB
// display_data is never copied just to be routed.

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// protocolVersion is the messaging protocol version we speak and put in every header.
const protocolVersion = "5.3"

// dateLayout is RFC 3339 with microseconds, what jupyter_client writes (and Python's isoformat parses).
const dateLayout = "2006-01-02T15:04:05.000000Z07:00"

var delimiter = []byte("<IDS|MSG>")

// errBadSignature marks a message whose HMAC does not match: it is dropped and counted, never routed.
var errBadSignature = errors.New("bad message signature")

// header is a message header (and, for replies, the parent header).
type header struct {
	MsgID    string  `json:"msg_id"`
	Session  string  `json:"session"`
	Username string  `json:"username"`
	Date     anyDate `json:"date"`
	MsgType  string  `json:"msg_type"`
	Version  string  `json:"version"`
}

// message is one decoded wire message. Metadata and Content are the raw JSON frames as received
// (they alias the receive buffers; nothing is copied).
type message struct {
	Identities [][]byte
	Header     header
	Parent     header // zero value when the parent header is {}
	Metadata   []byte
	Content    []byte
	Buffers    [][]byte
	RawHeader  []byte // the header and parent header frames as received, for raw subscribers
	RawParent  []byte
}

// session signs and builds messages for one kernel connection. It is safe for concurrent use.
type session struct {
	id       string
	username string
	key      []byte
	macs     sync.Pool // of hash.Hash (HMAC-SHA256 with key); hmac.New is not free
	seq      atomic.Uint64
}

func newSession(key []byte) *session {
	s := &session{id: randomHex(16), username: "carryover", key: key}
	s.macs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s
}

// newHeader returns a fresh header of msgType. msg_id is the session id plus a counter: unique, cheap,
// and readable in kernel logs.
func (s *session) newHeader(msgType string) header {
	return header{
		MsgID:    s.id + "_" + strconv.FormatUint(s.seq.Add(1), 10),
		Session:  s.id,
		Username: s.username,
		Date:     anyDate(time.Now().UTC().Format(dateLayout)),
		MsgType:  msgType,
		Version:  protocolVersion,
	}
}

// sign returns the lowercase hex HMAC-SHA256 of the given frames in order (header, parent, metadata,
// content), or nil when there is no key (signing disabled, as the protocol allows).
func (s *session) sign(parts ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	mac := s.macs.Get().(hash.Hash)
	mac.Reset()
	for _, p := range parts {
		mac.Write(p)
	}
	var sum [sha256.Size]byte
	out := make([]byte, hex.EncodedLen(sha256.Size))
	hex.Encode(out, mac.Sum(sum[:0]))
	s.macs.Put(mac)
	return out
}

// verify checks sig (hex, as received) against the frames in constant time.
func (s *session) verify(sig []byte, parts ...[]byte) bool {
	if len(s.key) == 0 {
		return true
	}
	want := s.sign(parts...)
	return hmac.Equal(want, sig)
}

var emptyObject = []byte("{}")

// encode serializes a message into its frames (without routing ids: we only talk through DEALER
// sockets, whose peer ROUTER adds our identity). parent may be nil. content must marshal to a JSON object.
func (s *session) encode(h header, parent *header, content any) ([][]byte, error) {
	return s.encodeWith(h, parent, nil, content)
}

// encodeWith is encode with the message's metadata (nil: {}).
func (s *session) encodeWith(h header, parent *header, metadata map[string]any, content any) ([][]byte, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode %s header: %w", h.MsgType, err)
	}
	pb := emptyObject
	if parent != nil && parent.MsgID != "" {
		if pb, err = json.Marshal(parent); err != nil {
			return nil, fmt.Errorf("encode %s parent header: %w", h.MsgType, err)
		}
	}
	var cb []byte
	switch c := content.(type) {
	case nil:
		cb = emptyObject
	case json.RawMessage:
		cb = c
	default:
		if cb, err = json.Marshal(c); err != nil {
			return nil, fmt.Errorf("encode %s content: %w", h.MsgType, err)
		}
	}
	md := emptyObject
	if len(metadata) > 0 {
		if md, err = json.Marshal(metadata); err != nil {
			return nil, fmt.Errorf("encode %s metadata: %w", h.MsgType, err)
		}
	}
	return [][]byte{delimiter, s.sign(hb, pb, md, cb), hb, pb, md, cb}, nil
}

// decode parses and verifies received frames. A bad signature returns errBadSignature; malformed
// framing or JSON returns another error. Both mean: drop the message.
func (s *session) decode(frames [][]byte) (*message, error) {
	i := 0
	for ; i < len(frames); i++ {
		if bytes.Equal(frames[i], delimiter) {
			break
		}
	}
	if i == len(frames) {
		return nil, errors.New("no <IDS|MSG> delimiter")
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("%d frames after delimiter, want at least 6", len(frames)-i)
	}
	sig, hb, pb, md, cb := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if !s.verify(sig, hb, pb, md, cb) {
		return nil, errBadSignature
	}
	m := &message{Identities: frames[:i], Metadata: md, Content: cb, RawHeader: hb, RawParent: pb}
	if len(frames) > i+6 {
		m.Buffers = frames[i+6:]
	}
	if err := json.Unmarshal(hb, &m.Header); err != nil {
		return nil, fmt.Errorf("decode header: %w", err)
	}
	if len(pb) > 2 { // "{}" is the common no-parent case
		if err := json.Unmarshal(pb, &m.Parent); err != nil {
			return nil, fmt.Errorf("decode parent header: %w", err)
		}
	}
	return m, nil
}

// randomHex returns n random bytes as hex. crypto/rand does not fail on Linux (Go >= 1.24 it cannot).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// anyDate is a header's date as a string. Jupyter clients relayed raw (server/jupyter) send it as an
// ISO string or as a number (nbclient): a number is kept as its JSON text, never a reason to drop
// the message.
type anyDate string

func (d *anyDate) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*d = anyDate(s)
		return nil
	}
	*d = anyDate(b)
	return nil
}
