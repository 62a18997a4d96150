package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"
)

// jupyterClientMessage is a message serialized by jupyter_client's Session (testdata): our verify and
// decode must accept exactly what the reference implementation signs.
func jupyterClientMessage(t *testing.T) (key string, frames [][]byte, msgID string) {
	t.Helper()
	b, err := os.ReadFile("testdata/jupyter_client_message.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Key    string   `json:"key"`
		Frames []string `json:"frames"`
		MsgID  string   `json:"msg_id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, f := range v.Frames {
		frames = append(frames, []byte(f))
	}
	return v.Key, frames, v.MsgID
}

func TestDecodeJupyterClientMessage(t *testing.T) {
	key, frames, msgID := jupyterClientMessage(t)
	s := newSession([]byte(key))
	m, err := s.decode(frames)
	if err != nil {
		t.Fatalf("decode a message signed by jupyter_client: %v", err)
	}
	if m.Header.MsgID != msgID || m.Header.MsgType != "execute_request" || m.Header.Version != "5.3" {
		t.Errorf("header = %+v", m.Header)
	}
	if m.Parent.MsgID != "parent-1" {
		t.Errorf("parent msg_id = %q, want parent-1", m.Parent.MsgID)
	}
	if len(m.Identities) != 1 || string(m.Identities[0]) != "route-a" {
		t.Errorf("identities = %q", m.Identities)
	}
	var c struct{ Code string }
	if err := json.Unmarshal(m.Content, &c); err != nil || c.Code != "print('héllo')\n1+1" {
		t.Errorf("content = %s (%v)", m.Content, err)
	}
}

func TestDecodeRejectsBadSignatures(t *testing.T) {
	key, frames, _ := jupyterClientMessage(t)
	sig := 2 // index of the signature frame (after one routing id and the delimiter)
	cases := map[string]func([][]byte) ([][]byte, []byte){
		"wrong key": func(f [][]byte) ([][]byte, []byte) { return f, []byte("another-key") },
		"tampered content": func(f [][]byte) ([][]byte, []byte) {
			f[len(f)-1] = bytes.Replace(f[len(f)-1], []byte("1+1"), []byte("1+2"), 1)
			return f, []byte(key)
		},
		"tampered parent": func(f [][]byte) ([][]byte, []byte) {
			f[sig+2] = bytes.Replace(f[sig+2], []byte("parent-1"), []byte("parent-2"), 1)
			return f, []byte(key)
		},
		"empty signature": func(f [][]byte) ([][]byte, []byte) { f[sig] = nil; return f, []byte(key) },
		"uppercase hex": func(f [][]byte) ([][]byte, []byte) {
			f[sig] = bytes.ToUpper(f[sig])
			return f, []byte(key)
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			fr := make([][]byte, len(frames))
			for i := range frames {
				fr[i] = append([]byte(nil), frames[i]...)
			}
			fr, k := mutate(fr)
			_, err := newSession(k).decode(fr)
			if !errors.Is(err, errBadSignature) {
				t.Fatalf("decode = %v, want errBadSignature", err)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	s := newSession([]byte("k"))
	if _, err := s.decode([][]byte{[]byte("no"), []byte("delimiter")}); err == nil {
		t.Error("a message without <IDS|MSG> was accepted")
	}
	if _, err := s.decode([][]byte{delimiter, []byte("sig"), []byte("{}")}); err == nil {
		t.Error("a message with too few frames was accepted")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	s := newSession([]byte("round-trip-key"))
	parent := s.newHeader("input_request")
	h := s.newHeader("input_reply")
	frames, err := s.encode(h, &parent, map[string]string{"value": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frames[0], delimiter) || len(frames) != 6 {
		t.Fatalf("frames = %q", frames)
	}
	m, err := s.decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header != h || m.Parent != parent {
		t.Errorf("round trip: header %+v parent %+v", m.Header, m.Parent)
	}
	if string(m.Content) != `{"value":"x"}` || string(m.Metadata) != "{}" {
		t.Errorf("content %s metadata %s", m.Content, m.Metadata)
	}
	// A peer with another key must reject it.
	if _, err := newSession([]byte("other")).decode(frames); !errors.Is(err, errBadSignature) {
		t.Errorf("other key: %v", err)
	}
}

func TestHeaderFields(t *testing.T) {
	s := newSession([]byte("k"))
	a, b := s.newHeader("execute_request"), s.newHeader("execute_request")
	if a.MsgID == b.MsgID || a.MsgID == "" {
		t.Errorf("msg ids not unique: %q %q", a.MsgID, b.MsgID)
	}
	if a.Session != s.id || a.Username == "" || a.Version != "5.3" || a.MsgType != "execute_request" {
		t.Errorf("header = %+v", a)
	}
	// RFC 3339 with microseconds, UTC.
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`).MatchString(string(a.Date)) {
		t.Errorf("date %q is not RFC 3339 with microseconds", a.Date)
	}
	if _, err := time.Parse(time.RFC3339Nano, string(a.Date)); err != nil {
		t.Error(err)
	}
	hb, _ := json.Marshal(a)
	for _, f := range []string{"msg_id", "session", "username", "date", "msg_type", "version"} {
		if !bytes.Contains(hb, []byte(`"`+f+`":`)) {
			t.Errorf("header JSON lacks %s: %s", f, hb)
		}
	}
	// No parent serializes as {} (what the protocol requires for requests).
	frames, _ := s.encode(a, nil, nil)
	if string(frames[3]) != "{}" || string(frames[5]) != "{}" {
		t.Errorf("parent %s content %s", frames[3], frames[5])
	}
}
