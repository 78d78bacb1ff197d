package handlers_test

import (
	"context"
	"errors"
	"image/jpeg"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/testkit"
)

// TestOpenAIGoSDK: the official Go SDK (github.com/openai/openai-go/v3), unmodified and pointed at
// videogen, creates (multipart, with size and seconds as it sends them), retrieves, lists with
// auto-paging, polls with NewAndPoll, downloads the MP4, its thumbnail and spritesheet, and deletes.
func TestOpenAIGoSDK(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// Every exchange the SDK makes is also checked against the OpenAPI document.
		client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(acct.Key), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)}))

		v, err := client.Videos.New(ctx, openai.VideoNewParams{Prompt: "a lighthouse at dusk", Model: "videogen-2.0-720p",
			Seconds: openai.VideoSeconds("8"), Size: openai.VideoSize("1280x720")})
		if err != nil {
			t.Fatalf("Videos.New: %v", err)
		}
		if v.ID == "" || v.Status != openai.VideoStatusQueued || v.Seconds != "8" || v.Size != "1280x720" {
			t.Fatalf("created %+v", v)
		}
		got, err := client.Videos.Get(ctx, v.ID)
		if err != nil || got.ID != v.ID {
			t.Fatalf("Videos.Get: %+v %v", got, err)
		}
		done, err := client.Videos.NewAndPoll(ctx, openai.VideoNewParams{Prompt: "a second lighthouse", Model: "videogen-2.0-720p",
			Seconds: openai.VideoSeconds("4"), Size: openai.VideoSize("720x1280")}, 50)
		if err != nil || done.Status != openai.VideoStatusCompleted || done.Progress != 100 {
			t.Fatalf("NewAndPoll: %+v %v", done, err)
		}
		s.WaitStatus(t, acct.Key, v.ID, 30*time.Second, "completed")

		seen := map[string]bool{}
		iter := client.Videos.ListAutoPaging(ctx, openai.VideoListParams{Limit: openai.Int(1)})
		for iter.Next() {
			seen[iter.Current().ID] = true
		}
		if err := iter.Err(); err != nil || !seen[v.ID] || !seen[done.ID] || len(seen) != 2 {
			t.Fatalf("ListAutoPaging saw %v (%v)", seen, err)
		}

		resp, err := client.Videos.DownloadContent(ctx, done.ID, openai.VideoDownloadContentParams{})
		if err != nil {
			t.Fatalf("DownloadContent: %v", err)
		}
		mp4, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Type") != "video/mp4" || len(mp4) < 12 || string(mp4[4:8]) != "ftyp" {
			t.Fatalf("content: %s, %d bytes", resp.Header.Get("Content-Type"), len(mp4))
		}
		// The stills: images of their own, never the MP4 again.
		for _, variant := range []openai.VideoDownloadContentParamsVariant{openai.VideoDownloadContentParamsVariantThumbnail,
			openai.VideoDownloadContentParamsVariantSpritesheet} {
			resp, err := client.Videos.DownloadContent(ctx, done.ID, openai.VideoDownloadContentParams{Variant: variant})
			if err != nil {
				t.Fatalf("DownloadContent %s: %v", variant, err)
			}
			img, err := jpeg.Decode(resp.Body)
			resp.Body.Close()
			if err != nil || resp.Header.Get("Content-Type") != "image/jpeg" {
				t.Fatalf("%s: %s, %v", variant, resp.Header.Get("Content-Type"), err)
			}
			if b := img.Bounds(); variant == openai.VideoDownloadContentParamsVariantThumbnail && (b.Dx() != 720 || b.Dy() != 1280) {
				t.Fatalf("thumbnail of a 720x1280 video is %v", b)
			}
		}

		del, err := client.Videos.Delete(ctx, done.ID)
		if err != nil || !del.Deleted || del.ID != done.ID || string(del.Object) != "video.deleted" {
			t.Fatalf("Delete: %+v %v", del, err)
		}
		var apiErr *openai.Error
		if _, err := client.Videos.Get(ctx, done.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "not_found" {
			t.Fatalf("Get after Delete: %v", err)
		}
		// Remix has its own test (TestOpenAIGoSDKRemix); of a deleted video it is 404, as for any id.
		if _, err := client.Videos.Remix(ctx, done.ID, openai.VideoRemixParams{Prompt: "again"}); !errors.As(err, &apiErr) ||
			apiErr.StatusCode != 404 || apiErr.Code != "not_found" {
			t.Fatalf("Remix: %v", err)
		}
	})
}
