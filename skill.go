package carryover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// SkillFile is one file of a tenant's skills (helper modules, scripts, small data every session of
// the tenant sees at /skills) as the store keeps it. Path is slash-separated and relative
// ("helpers/x.py"); Hash is SkillHash of the content, so a node's cache of the skills tells a
// changed file from an unchanged one without reading it.
type SkillFile struct {
	Tenant    string    `db:"tenant" json:"-"`
	Path      string    `db:"path" json:"path"`
	Size      int64     `db:"size" json:"size"`
	Hash      string    `db:"hash" json:"hash"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

// SkillStore keeps each tenant's skills in the store, like everything else a user saves, so every
// node of a cluster sees them and a lost data dir loses nothing (a node's on-disk folder is only a
// cache for the sandbox's bind mount). The content is a plain blob per file, not chunks: skills are
// small (an API upload is capped by the request body limit), a file's bytes and its row change in
// one transaction, and chunks would need GC roots of their own (GC keeps only what checkpoints
// reach).
type SkillStore interface {
	// ListSkills returns the tenant's files, by path; none is an empty list.
	ListSkills(ctx context.Context, tenant string) ([]SkillFile, error)
	// GetSkill returns one file and its content; CodeNotFound if there is none.
	GetSkill(ctx context.Context, tenant, path string) (SkillFile, []byte, error)
	// PutSkill creates or replaces a file and returns it as stored (Hash and UpdatedAt set).
	PutSkill(ctx context.Context, tenant, path string, content []byte) (SkillFile, error)
	// DeleteSkill removes a file; CodeNotFound if there is none.
	DeleteSkill(ctx context.Context, tenant, path string) error
}

// SkillHash is the hash a SkillFile carries: hex SHA-256 of the content.
func SkillHash(content []byte) string {
	h := sha256.Sum256(content)
	return hex.EncodeToString(h[:])
}
