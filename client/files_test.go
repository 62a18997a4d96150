package client_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/carryover/carryover/client"
)

func TestFiles(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	fi, err := api.PutFile(ctx, s.ID, "dir/my notes.md", []byte("hello"))
	if err != nil || fi.Path != "dir/my notes.md" || fi.Size != 5 {
		t.Fatalf("PutFile: %+v, %v", fi, err)
	}
	got, err := api.GetFile(ctx, s.ID, "/workspace/dir/my notes.md")
	if err != nil || string(got) != "hello" {
		t.Fatalf("GetFile: %q, %v", got, err)
	}
	bin := []byte{0, 1, 2, 255}
	if _, err := api.PostFile(ctx, s.ID, "/workspace/b.bin", base64.StdEncoding.EncodeToString(bin), "base64"); err != nil {
		t.Fatalf("PostFile: %v", err)
	}
	if got, err := api.GetFile(ctx, s.ID, "b.bin"); err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("GetFile b.bin: %v, %v", got, err)
	}
	files, err := api.ListFiles(ctx, s.ID)
	if err != nil || len(files) != 2 || files[0].Path != "b.bin" || files[0].Size != 4 || files[1].Path != "dir/my notes.md" {
		t.Fatalf("ListFiles: %+v, %v", files, err)
	}
	if got := resultOf(run(t, s.ID, "open('dir/my notes.md').read()")); got != "'hello'" {
		t.Fatalf("the kernel reads %s", got)
	}
	if err := api.DeleteFile(ctx, s.ID, "dir/my notes.md"); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	_, err = api.GetFile(ctx, s.ID, "dir/my notes.md")
	wantAPIError(t, err, http.StatusNotFound, client.CodeNotFound)
	if _, err := api.GetFile(ctx, s.ID, "/etc/passwd"); err == nil || client.ErrorCode(err) != "" {
		t.Fatalf("GetFile outside the workspace: %v", err)
	}
}
