package carryover

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Validation of what callers hand the service, on the domain types (benbjohnson/wtf's Validate
// methods): each answers an *Error of CodeInvalid whose details name the field, so every front door
// refuses the same input with the same words.

// Validate refuses negative limits (zero means no limit).
func (b Budget) Validate() error {
	if b.CostCapCents < 0 || b.IterationLimit < 0 || b.DurationLimitSeconds < 0 {
		return Errorf(CodeInvalid, "budget limits must not be negative").WithDetails("field", "budget")
	}
	return nil
}

// ValidateSessionID refuses an id that does not match SessionIDPattern (ids name directories).
func ValidateSessionID(id string) error {
	if !SessionIDPattern.MatchString(id) {
		return Errorf(CodeInvalid, "session_id must match %s", SessionIDPattern.String()).WithDetails("field", "session_id")
	}
	return nil
}

// ValidateLanguage refuses a language other than Python (the only kernel carryover runs); "" is Python.
func ValidateLanguage(lang string) error {
	switch lang {
	case "", "python", "python3":
		return nil
	}
	return Errorf(CodeInvalid, "language %q is not available; use \"python\"", lang).WithDetails("field", "language")
}

// ValidateCode refuses code with a NUL byte: Python cannot compile such source, and the kernel sends
// no execute_reply for it, so the run would wait for its whole timeout (found by the API fuzz).
func ValidateCode(code string) error {
	if strings.ContainsRune(code, 0) {
		return Errorf(CodeInvalid, "code may not contain NUL bytes").WithDetails("field", "code")
	}
	return nil
}

// ValidateEnv refuses env var names a process cannot have (empty, with "=" or NUL) and values with a
// NUL: the kernel would raise on them, and that is the caller's mistake, not the server's. field is
// the request's name for env ("env", "env_vars").
func ValidateEnv(env map[string]string, field string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(CodeInvalid, "invalid env var name %q", k).WithDetails("field", field)
		}
		if strings.ContainsRune(v, 0) {
			return Errorf(CodeInvalid, "env var %q: a value may not contain NUL", k).WithDetails("field", field)
		}
	}
	return nil
}

// ToolNamePattern is what a tool's name must match.
var ToolNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

// Validate checks the tool's name and that its input_schema, when given, is a JSON Schema object
// with sane keywords (type, properties, required, items: what agents read of it).
func (t Tool) Validate() error {
	if !ToolNamePattern.MatchString(t.Name) {
		return Errorf(CodeInvalid, "tool name must match %s", ToolNamePattern.String()).WithDetails("field", "name")
	}
	return validateSchema(t.InputSchema)
}

func validateSchema(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return schemaErr("must be a JSON object")
	}
	return checkSchemaNode(schema)
}

func schemaErr(msg string) error {
	return Errorf(CodeInvalid, "input_schema: %s", msg).WithDetails("field", "input_schema")
}

var schemaTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

// checkSchemaNode checks one schema object and, recursively, its properties and items.
func checkSchemaNode(n map[string]any) error {
	if t, ok := n["type"]; ok {
		switch tv := t.(type) {
		case string:
			if !schemaTypes[tv] {
				return schemaErr(fmt.Sprintf("unknown type %q", tv))
			}
		case []any:
			for _, x := range tv {
				if s, ok := x.(string); !ok || !schemaTypes[s] {
					return schemaErr("type list must hold type names")
				}
			}
		default:
			return schemaErr("type must be a string or a list of strings")
		}
	}
	if p, ok := n["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return schemaErr("properties must be an object")
		}
		for name, sub := range props {
			m, ok := sub.(map[string]any)
			if !ok {
				return schemaErr(fmt.Sprintf("property %q must be a schema object", name))
			}
			if err := checkSchemaNode(m); err != nil {
				return err
			}
		}
	}
	if r, ok := n["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return schemaErr("required must be a list of names")
		}
		for _, x := range list {
			if _, ok := x.(string); !ok {
				return schemaErr("required must be a list of names")
			}
		}
	}
	if it, ok := n["items"]; ok {
		m, ok := it.(map[string]any)
		if !ok {
			return schemaErr("items must be a schema object")
		}
		return checkSchemaNode(m)
	}
	return nil
}

// WorkspacePath validates a path the API was given and returns it relative to /workspace
// ("" is the workspace root). Absolute paths must lie under /workspace; ".." is refused.
func WorkspacePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return "", Errorf(CodeInvalid, "invalid path %q", p).WithDetails("path", p)
	}
	if strings.HasPrefix(p, "/") {
		if p != "/workspace" && !strings.HasPrefix(p, "/workspace/") {
			return "", Errorf(CodeInvalid, "path %q is outside /workspace", p).WithDetails("path", p)
		}
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/workspace"), "/")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", Errorf(CodeInvalid, "path %q may not contain ..", p).WithDetails("path", p)
		}
	}
	return strings.Trim(strings.ReplaceAll(p, "//", "/"), "/"), nil
}
