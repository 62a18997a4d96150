package template

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
)

// Shared lets the servers of one process share templates: the tests run a few hundred servers in
// one process, and each template's start is ~0.7 s of CPU (importing ipykernel), most of it for
// servers that fork a kernel or two. A Provisioner made by Shared.New forks from the Shared's one
// template for its Config's kernels (the same interpreter, pre-import set, preload, environment and
// import-time env), started by the first such Provisioner and stopped when the last one closes;
// it keeps its own local provisioner (cold starts, spool dirs, commands) and counts its own forks.
// A server in production has its template to itself (New). So does a test that kills its template
// or looks for it in its data dir.
type Shared struct {
	mu sync.Mutex
	m  map[string]*sharedTemplate
}

type sharedTemplate struct {
	sup  *supervisor
	refs int
}

// NewShared is an empty set of shared templates.
func NewShared() *Shared { return &Shared{m: map[string]*sharedTemplate{}} }

// New is a Provisioner forking from the shared template of cfg's kernels, started now if there is
// none. cfg.Dir is not used: a shared template lives in a temp dir of its own, since it outlives
// the server whose data dir the first Provisioner had.
func (sh *Shared) New(cfg Config) (*Provisioner, error) {
	cfg = cfg.withDefaults()
	key, err := cfg.templateKey()
	if err != nil {
		return nil, fmt.Errorf("kernel template: %w", err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.m[key]
	if st == nil {
		own := cfg
		own.Dir = ""
		sup, err := startSupervisor(own)
		if err != nil {
			return nil, err
		}
		st = &sharedTemplate{sup: sup}
		sh.m[key] = st
	}
	st.refs++
	return &Provisioner{cfg: cfg, sup: st.sup, release: func() error { return sh.release(key, st) }}, nil
}

// release is one Provisioner's Close: the last one stops the template.
func (sh *Shared) release(key string, st *sharedTemplate) error {
	sh.mu.Lock()
	st.refs--
	last := st.refs == 0
	if last {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	if !last {
		return nil
	}
	return st.sup.close()
}

// templateKey names what makes two Configs' templates the same process. An empty list or map and
// none are the same (JSON tells [] from null: a config's `pre_import: []` and another's left out
// made two templates of the same kernels).
func (c Config) templateKey() (string, error) {
	pre, env := c.PreImport, c.Env
	if len(pre) == 0 {
		pre = nil
	}
	if len(env) == 0 {
		env = nil
	}
	b, err := json.Marshal(struct {
		Python    string
		PreImport []string
		Preload   [32]byte
		Env       map[string]string
		ImportEnv map[string]string
	}{c.Python, pre, sha256.Sum256([]byte(c.Preload)), env, c.importEnv()})
	return string(b), err
}
