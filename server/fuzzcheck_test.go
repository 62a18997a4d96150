package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// answerChecker holds openapi.json compiled for checking answers: every error in the API's error
// shape with a documented code whose status is the answer's, and 2xx bodies as described.
type answerChecker struct {
	doc      map[string]any
	c        *jsonschema.Compiler
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
	codes    map[string]int // error code -> its HTTP status (ErrorObject's x-status)
}

func newAnswerChecker(raw []byte) (*answerChecker, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	res, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", res); err != nil {
		return nil, err
	}
	ac := &answerChecker{doc: doc, c: c, compiled: map[string]*jsonschema.Schema{}, codes: map[string]int{}}
	v, ok := jsonPointer(doc, "#/components/schemas/ErrorObject/properties/code/x-status")
	m, isObj := v.(map[string]any)
	if !ok || !isObj || len(m) == 0 {
		return nil, fmt.Errorf("openapi.json: ErrorObject.code has no x-status map")
	}
	for code, st := range m {
		f, _ := st.(float64)
		ac.codes[code] = int(f)
	}
	return ac, nil
}

// schema compiles (once) the schema at a JSON pointer of openapi.json ("#/components/...").
func (ac *answerChecker) schema(ptr string) (*jsonschema.Schema, error) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if s, ok := ac.compiled[ptr]; ok {
		return s, nil
	}
	s, err := ac.c.Compile("openapi.json" + ptr)
	if err != nil {
		return nil, err
	}
	ac.compiled[ptr] = s
	return s, nil
}

// validate checks a JSON document against the schema at ptr.
func (ac *answerChecker) validate(ptr string, body []byte) error {
	s, err := ac.schema(ptr)
	if err != nil {
		return fmt.Errorf("compiling %s: %v", ptr, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("does not match %s: %v", ptr, err)
	}
	return nil
}

// errorShape checks an error answer: the Error schema, a code of the enum with a non-empty message,
// and the code's documented status equal to the answer's. It returns the code.
func (ac *answerChecker) errorShape(status int, body []byte) (string, error) {
	if err := ac.validate("#/components/schemas/Error", body); err != nil {
		return "", fmt.Errorf("error answer %d not in the API's error shape (%v): %s", status, err, clip(body))
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if strings.TrimSpace(e.Error.Message) == "" {
		return e.Error.Code, fmt.Errorf("error answer %d has an empty message: %s", status, clip(body))
	}
	if want, ok := ac.codes[e.Error.Code]; !ok || want != status {
		return e.Error.Code, fmt.Errorf("error code %q answered with status %d (documented: %d): %s", e.Error.Code, status, want, clip(body))
	}
	return e.Error.Code, nil
}

// response finds what op documents for status: ok false when the status is not documented, and
// the JSON pointer of its application/json schema ("" when it has none).
func (ac *answerChecker) response(op *apiOp, status int) (ptr string, ok bool) {
	base := op.ptr + "/responses/"
	v, found := jsonPointer(ac.doc, base+strconv.Itoa(status))
	if !found {
		if v, found = jsonPointer(ac.doc, base+"default"); !found {
			return "", false
		}
		base += "default"
	} else {
		base += strconv.Itoa(status)
	}
	m, _ := v.(map[string]any)
	if ref, isRef := m["$ref"].(string); isRef {
		base = ref
		rv, _ := jsonPointer(ac.doc, ref)
		m, _ = rv.(map[string]any)
	}
	content, _ := m["content"].(map[string]any)
	if _, hasJSON := content["application/json"]; hasJSON {
		return base + "/content/application~1json/schema", true
	}
	return "", true
}

func clip(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%q... (%d bytes)", b[:300], len(b))
	}
	return fmt.Sprintf("%q", b)
}
