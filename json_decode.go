package carryover

import (
	"encoding/json"
	"errors"
	"reflect"
	"time"
)

// UnmarshalRequest decodes the JSON a caller sent (a request body, a websocket frame, a notebook)
// into v. Its error is an invalid_request that names a field of the wrong type in JSON's words
// ("field \"data\" must be an object, not array"): the caller sent JSON, and Go's names for the
// types it decodes into ("map[string]interface {}", a struct's field path) mean nothing to it.
func UnmarshalRequest(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return Errorf(CodeInvalid, "field %q must be %s, not %s", te.Field, jsonTypeName(te.Type), te.Value).WithDetails("field", te.Field)
	case errors.As(err, &pe): // a time field: Go names its layout, not the format a caller knows
		return Errorf(CodeInvalid, "a time must be RFC 3339 (like 2026-12-31T23:59:00Z), not %q", pe.Value)
	default:
		return Errorf(CodeInvalid, "malformed JSON: %v", err)
	}
}

// jsonTypeName names what a Go type decodes from, in JSON's words.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "a JSON value"
	}
}
