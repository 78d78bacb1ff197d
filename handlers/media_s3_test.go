package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestMediaOnS3 runs the media flow on S3-compatible storage (a real versitygw): uploads land in the
// bucket, /media answers with a redirect to a short-lived presigned GET that serves the bytes with their
// type, the simulator fetches inputs through that redirect, and the output is stored and served from S3.
func TestMediaOnS3(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s3 := testkit.StartS3(t)
		s := testkit.Start(t, dbURL, map[string]string{
			"S3_ENDPOINT": s3.Endpoint, "S3_BUCKET": s3.Bucket, "S3_ACCESS_KEY_ID": s3.AccessKeyID,
			"S3_SECRET_ACCESS_KEY": s3.SecretAccessKey, "S3_PRESIGN_TTL": "30s",
		})
		acct := s.NewAccount(t, "10")
		img := testkit.PNG(t, 40, 30)
		a := s.Upload(t, acct.Key, "", testkit.File("input_reference", "first.png", img)).Answer(t)
		if files, _ := s.MediaOnDisk(t); files != 0 {
			t.Fatalf("%d media files on local disk; they belong in the bucket", files)
		}

		r := get(t, *a.StartImageURL)
		loc := r.Header.Get("Location")
		if r.Status != 302 || !strings.HasPrefix(loc, s3.Endpoint+"/"+s3.Bucket+"/media/") || !strings.Contains(loc, "X-Amz-Expires=30") {
			t.Fatalf("GET /media: %d, Location %q; want a 302 to a 30 s presigned URL in the bucket", r.Status, loc)
		}
		obj := get(t, loc)
		if obj.Status != 200 || string(obj.Body) != string(img) || obj.Header.Get("Content-Type") != "image/png" {
			t.Fatalf("presigned GET: %d %s, %d bytes", obj.Status, obj.Header.Get("Content-Type"), len(obj.Body))
		}
		if r := get(t, (*a.StartImageURL)[:len(*a.StartImageURL)-1]+"x"); r.Status != 404 {
			t.Fatalf("tampered link on S3: %d", r.Status)
		}

		v := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "from the bucket", "start_image_url": *a.StartImageURL})
		done := s.WaitStatus(t, acct.Key, v["id"].(string), 30*time.Second, "completed", "failed")
		if done["status"] != "completed" {
			t.Fatalf("task on S3 storage ended %v: %v", done["status"], done["error"])
		}
		req, _ := http.NewRequest("GET", s.URL+"/v1/videos/"+v["id"].(string)+"/content", nil)
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(body) < 1000 || string(body[4:8]) != "ftyp" {
			t.Fatalf("content from S3: %d, %d bytes", resp.StatusCode, len(body))
		}
		for _, st := range s.Sim.Tasks() {
			if st.Prompt == "from the bucket" && st.InputBytes != int64(len(img)) {
				t.Fatalf("the simulator fetched %d input bytes through the redirect, want %d", st.InputBytes, len(img))
			}
		}
	})
}
