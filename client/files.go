package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// FileInfo is a workspace file.
type FileInfo struct {
	Path       string    `json:"path"` // relative to /workspace
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
}

// FileRequest is the body of POST .../files (StateSet's writeAgentSessionFile).
type FileRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"` // utf-8 (default) or base64
}

// fileAnswer and filesAnswer are the answers of the files endpoints.
type fileAnswer struct {
	File FileInfo `json:"file"`
}

type filesAnswer struct {
	Files []FileInfo `json:"files"`
}

// filePath is the URL of a workspace file. The API takes "notes.md" or "/workspace/notes.md"; in a
// URL the path follows .../files/, so the /workspace prefix is dropped here, and any other absolute
// path is refused before it could be cleaned into some other file.
func filePath(id, p string) (string, error) {
	if p == "/workspace" || strings.HasPrefix(p, "/workspace/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/workspace"), "/")
	} else if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("client: file path %q is outside /workspace", p)
	}
	if p == "" {
		return "", fmt.Errorf("client: empty file path")
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		parts[i] = url.PathEscape(part)
	}
	return sessionPath(id, "files") + "/" + strings.Join(parts, "/"), nil
}

// ListFiles lists every regular file of the session's workspace.
func (c *Client) ListFiles(ctx context.Context, id string) ([]FileInfo, error) {
	var out filesAnswer
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "files"), nil, &out); err != nil {
		return nil, err
	}
	return out.Files, nil
}

// GetFile reads a workspace file.
func (c *Client) GetFile(ctx context.Context, id, path string) ([]byte, error) {
	p, err := filePath(id, path)
	if err != nil {
		return nil, err
	}
	var data []byte
	if err := c.Do(ctx, http.MethodGet, p, nil, &data); err != nil {
		return nil, err
	}
	return data, nil
}

// PutFile writes content to a workspace file, creating its parent directories.
func (c *Client) PutFile(ctx context.Context, id, path string, content []byte) (*FileInfo, error) {
	p, err := filePath(id, path)
	if err != nil {
		return nil, err
	}
	if content == nil {
		content = []byte{} // a body, even empty, so the file is written
	}
	var out fileAnswer
	if err := c.Do(ctx, http.MethodPut, p, content, &out); err != nil {
		return nil, err
	}
	return &out.File, nil
}

// PostFile writes a file the JSON way: content is text (encoding "utf-8" or "") or base64.
func (c *Client) PostFile(ctx context.Context, id, path, content, encoding string) (*FileInfo, error) {
	body := FileRequest{Path: path, Content: content, Encoding: encoding}
	var out fileAnswer
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "files"), body, &out); err != nil {
		return nil, err
	}
	return &out.File, nil
}

// DeleteFile removes a workspace file.
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	p, err := filePath(id, path)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}
