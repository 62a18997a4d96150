package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/sqlite"
)

// benchStore is the set-up the store-backed sections share: env.Scratch/name with a workspace dir
// ws inside it, and a SQLite store (file under dir) holding one running session. The caller closes
// st.
func benchStore(ctx context.Context, env *benchEnv, name, file, session string) (dir, ws string, st *sqlite.Store, err error) {
	dir = filepath.Join(env.Scratch, name)
	ws = filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", "", nil, err
	}
	st, err = sqlite.Open(filepath.Join(dir, file))
	if err != nil {
		return "", "", nil, err
	}
	now := time.Now().UTC()
	if err := st.CreateSession(ctx, carryover.SessionRecord{ID: session, State: "running", Doc: json.RawMessage(`{}`),
		CreatedAt: now, UpdatedAt: now}); err != nil {
		st.Close()
		return "", "", nil, err
	}
	return dir, ws, st, nil
}
