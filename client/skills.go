package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The answers of the skills endpoints.
type (
	skillsAnswer struct {
		Skills []FileInfo `json:"skills"`
	}
	skillAnswer struct {
		Skill FileInfo `json:"skill"`
	}
)

// skillPath is the URL of one of the tenant's skill files ("lib/x.py" or "/skills/lib/x.py").
func skillPath(p string) (string, error) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "/skills"), "/")
	if p == "" {
		return "", fmt.Errorf("client: empty skill path")
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		parts[i] = url.PathEscape(part)
	}
	return "/api/skills/" + strings.Join(parts, "/"), nil
}

// ListSkills lists the tenant's skill files (every session of the tenant sees them at /skills).
func (c *Client) ListSkills(ctx context.Context) ([]FileInfo, error) {
	var out skillsAnswer
	if err := c.Do(ctx, http.MethodGet, "/api/skills", nil, &out); err != nil {
		return nil, err
	}
	return out.Skills, nil
}

// GetSkill reads a skill file.
func (c *Client) GetSkill(ctx context.Context, path string) ([]byte, error) {
	p, err := skillPath(path)
	if err != nil {
		return nil, err
	}
	var data []byte
	if err := c.Do(ctx, http.MethodGet, p, nil, &data); err != nil {
		return nil, err
	}
	return data, nil
}

// PutSkill writes a skill file, creating its parent directories.
func (c *Client) PutSkill(ctx context.Context, path string, content []byte) (*FileInfo, error) {
	p, err := skillPath(path)
	if err != nil {
		return nil, err
	}
	if content == nil {
		content = []byte{}
	}
	var out skillAnswer
	if err := c.Do(ctx, http.MethodPut, p, content, &out); err != nil {
		return nil, err
	}
	return &out.Skill, nil
}

// DeleteSkill removes a skill file.
func (c *Client) DeleteSkill(ctx context.Context, path string) error {
	p, err := skillPath(path)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}
