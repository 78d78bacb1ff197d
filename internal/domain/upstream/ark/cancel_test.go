package ark_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"videogen/internal/domain/upstream"
)

// TestCancel: DELETE {base}/contents/generations/tasks/{id} is sent only for a queued task, the one
// state in which Ark cancels (BytePlus ModelArk "Cancel or delete a video generation task", as mirrored
// at docs.powertokens.ai/en/zmodelVideo/byteplus/seedance/cancel-delete-video-task, read 2026-11-26:
// queued → cancelled; running and cancelled cannot be deleted; succeeded, failed and expired are
// deleted, no longer queryable). A finished task's record is never deleted: a succeeded one still
// tells what it cost.
func TestCancel(t *testing.T) {
	ctx := context.Background()
	task := func(status string) answer { return okAnswer(`{"id":"cgt-1","status":"` + status + `"}`) }
	deleted := okAnswer(`{}`)
	cases := []struct {
		name    string
		get     answer
		del     *answer
		want    error
		deletes bool
	}{
		{"queued", task("queued"), &deleted, nil, true},
		{"running", task("running"), nil, upstream.ErrNotCancellable, false},
		{"succeeded", task("succeeded"), nil, upstream.ErrNotCancellable, false},
		{"failed", task("failed"), nil, nil, false},
		{"expired", task("expired"), nil, nil, false},
		{"already cancelled", task("cancelled"), nil, nil, false},
		// It started between the read and the DELETE: Ark's refusal of the operation in the task's phase
		// (the common error-code table's OperationDenied.UnsupportedPhase) is about the task, not the key.
		{"started meanwhile", task("queued"), &answer{status: 403, body: docError("Forbidden", "OperationDenied.UnsupportedPhase",
			"Operation is denied because operation is not supported while the target is in its current phase.")}, upstream.ErrNotCancellable, true},
		{"refused meanwhile", task("queued"), &answer{status: 400, body: docError("BadRequest", "InvalidParameter",
			"One or more parameters specified in the request are not valid.")}, upstream.ErrNotCancellable, true},
		{"gone meanwhile", task("queued"), &answer{status: 404, body: docError("NotFound", "ResourceNotFound", "The specified task is not found.")}, upstream.ErrUnknownTask, true},
		{"unknown task", answer{status: 404, body: docError("NotFound", "ResourceNotFound", "The specified task is not found.")}, nil, upstream.ErrUnknownTask, false},
		{"key refused", answer{status: 401, body: docError("Unauthorized", "AuthenticationError", "The API key or AK/SK in the request is missing or invalid.")}, nil, upstream.ErrAuth, false},
		{"account overdue", task("queued"), &answer{status: 403, body: docError("Forbidden", "AccountOverdueError",
			"The request failed because your account has an overdue balance.")}, upstream.ErrOutOfCredit, true},
		{"unavailable", task("queued"), &answer{status: 503, body: ``}, upstream.ErrTransient, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answers := map[string]answer{"GET " + tasks + "/cgt-1": tc.get}
			if tc.del != nil {
				answers["DELETE "+tasks+"/cgt-1"] = *tc.del
			}
			p, c := serve(t, answers)
			err := c.Cancel(ctx, cred, "cgt-1")
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("cancel: %v, want %v", err, tc.want)
			}
			if tc.want != upstream.ErrAuth && errors.Is(err, upstream.ErrAuth) {
				t.Fatalf("%v: taken for a refused key", err)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if got := slices.Contains(p.calls, "DELETE "+tasks+"/cgt-1"); got != tc.deletes {
				t.Fatalf("calls %v: DELETE sent %v, want %v", p.calls, got, tc.deletes)
			}
		})
	}
}

// TestLastFrame: the last frame comes from content.last_frame_url on object storage, typed by its
// header or, when storage does not say, by its bytes; only a completed task has one.
func TestLastFrame(t *testing.T) {
	ctx := context.Background()
	frame := pngBytes(t, 4, 4)
	jpeg := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "credential sent to storage", http.StatusTeapot)
			return
		}
		switch r.URL.Path {
		case "/f.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(frame)
		case "/f.jpg":
			w.Header().Set("Content-Type", "binary/octet-stream")
			_, _ = w.Write(jpeg)
		case "/f.html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>AccessDenied</html>")
		default:
			http.Error(w, "AccessDenied", http.StatusForbidden)
		}
	}))
	defer storage.Close()
	succeeded := func(lastFrame string) answer {
		return okAnswer(`{"id":"cgt-1","status":"succeeded","content":{"video_url":"` + storage.URL + `/v.mp4","last_frame_url":"` + lastFrame + `"}}`)
	}
	cases := []struct {
		name, contentType string
		get               answer
		body              []byte
		want              error
	}{
		{"png", "image/png", succeeded(storage.URL + "/f.png?X-Tos-Signature=s"), frame, nil},
		{"jpeg, typed by its bytes", "image/jpeg", succeeded(storage.URL + "/f.jpg?X-Tos-Signature=s"), jpeg, nil},
		{"not an image", "", succeeded(storage.URL + "/f.html?X-Tos-Signature=s"), nil, upstream.ErrTransient},
		{"expired URL", "", succeeded(storage.URL + "/gone.png?X-Tos-Signature=secretsig"), nil, upstream.ErrUnknownTask},
		{"none returned", "", succeeded(""), nil, upstream.ErrUnknownTask},
		{"running", "", okAnswer(`{"id":"cgt-1","status":"running"}`), nil, upstream.ErrTransient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := serve(t, map[string]answer{"GET " + tasks + "/cgt-1": tc.get})
			body, ct, _, err := c.DownloadLastFrame(ctx, cred, "cgt-1")
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("last frame: %v, want %v", err, tc.want)
			}
			if err != nil {
				if strings.Contains(err.Error(), "secretsig") || strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows a signature or the secret: %v", err)
				}
				return
			}
			b, _ := io.ReadAll(body)
			_ = body.Close()
			if ct != tc.contentType || string(b) != string(tc.body) {
				t.Fatalf("got %s %q", ct, b)
			}
		})
	}
}
